import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { createVault } from '../../src/vault/index.js';
import { overlappingContent } from '../fixtures/vault/contents.js';
import { runTogether, tempDir } from './helpers.js';

const { dir, cleanup } = tempDir('tt-vault-procs-');
afterAll(cleanup);

describe('several processes on one vault file', () => {
  it('4 processes × 200 overlapping puts: no errors, each distinct content stored once', async () => {
    const db = join(dir, 'shared', 'vault.sqlite3'); // not created yet: the workers race to create it
    const distinct = 60;
    const results = await runTogether(
      'put-worker.ts',
      [0, 1, 2, 3].map((w) => [db, String(w), '200', String(distinct)]),
      join(dir, 'go-puts'),
    );
    const idsByItem = new Map<number, Set<string>>();
    for (const r of results) {
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as { item: number; artifactId: string });
      expect(lines).toHaveLength(200);
      for (const { item, artifactId } of lines) idsByItem.set(item, (idsByItem.get(item) ?? new Set()).add(artifactId));
    }
    expect(idsByItem.size).toBe(distinct);
    for (const ids of idsByItem.values()) expect(ids.size).toBe(1);

    const raw = new Database(db, { readonly: true });
    expect(raw.pragma('integrity_check', { simple: true })).toBe('ok');
    expect(raw.prepare('SELECT COUNT(*) FROM artifacts').pluck().get()).toBe(distinct);
    expect(raw.prepare('SELECT COUNT(DISTINCT sha256) FROM artifacts').pluck().get()).toBe(distinct);
    expect(raw.prepare('SELECT COUNT(*) FROM artifact_observations').pluck().get()).toBe(800);
    raw.close();

    await using vault = await createVault({ path: db });
    for (const [item, ids] of idsByItem) {
      const [id] = [...ids];
      const page = await vault.page(id!, 0, 20_000);
      expect(page.nextOffset).toBeNull();
      expect(page.content).toBe(overlappingContent(item));
    }
    expect((await vault.usage()).artifacts).toBe(distinct);
  });

  it('a lease race across 6 processes has exactly one inline winner', async () => {
    const db = join(dir, 'lease.sqlite3');
    const setup = await createVault({ path: db });
    const { artifactId } = await setup.put({ content: 'contested evidence', toolName: 'terminal' });
    await setup.close();
    const results = await runTogether(
      'claim-worker.ts',
      [0, 1, 2, 3, 4, 5].map((k) => [db, 'session-1', artifactId, `req-${k}`, '1']),
      join(dir, 'go-claims'),
    );
    for (const r of results) {
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
    }
    expect(results.map((r) => r.stdout.trim()).filter((o) => o === 'true')).toHaveLength(1);
    expect(results.map((r) => r.stdout.trim()).filter((o) => o === 'false')).toHaveLength(5);
    const raw = new Database(db, { readonly: true });
    expect(raw.prepare('SELECT COUNT(*) FROM artifact_exposures').pluck().get()).toBe(1);
    raw.close();
  });
});
