/** Several processes on one store (a SQLite file, or one PostgreSQL schema standing in for hosts). */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createVault } from '../../src/vault/index.js';
import { overlappingContent } from '../fixtures/vault/contents.js';
import { DIALECTS, freshStore, type FreshStore } from './dialects.js';
import { runTogether, tempDir } from './helpers.js';

const { dir, cleanup } = tempDir('tt-vault-procs-');
afterAll(cleanup);

for (const dialect of DIALECTS) {
  describe(`several processes on one ${dialect} vault`, () => {
    const stores: FreshStore[] = [];
    afterEach(async () => {
      for (const s of stores.splice(0)) await s.cleanup();
    });
    /** The store's address for a worker: the file path, or the URL. */
    const fresh = async (name: string): Promise<{ store: FreshStore; db: string }> => {
      const store = await freshStore(dialect, name);
      stores.push(store);
      return { store, db: 'path' in store.location ? store.location.path : store.location.url };
    };
    const count = async (
      store: FreshStore,
      table: 'artifacts' | 'artifact_observations' | 'artifact_exposures',
    ): Promise<number> =>
      Number(
        (
          await store
            .raw()
            .selectFrom(table)
            .select((eb) => eb.fn.countAll<number>().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );

    it('4 processes × 200 overlapping puts: no errors, each distinct content stored once', async () => {
      const { store, db } = await fresh(join('shared', 'vault.sqlite3')); // not created yet: the workers race to create it
      const distinct = 60;
      const results = await runTogether(
        'put-worker.ts',
        [0, 1, 2, 3].map((w) => [db, String(w), '200', String(distinct)]),
        join(dir, `go-puts-${dialect}`),
      );
      const idsByItem = new Map<number, Set<string>>();
      for (const r of results) {
        expect(r.stderr).toBe('');
        expect(r.code).toBe(0);
        const lines = r.stdout
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as { item: number; artifactId: string });
        expect(lines).toHaveLength(200);
        for (const { item, artifactId } of lines)
          idsByItem.set(item, (idsByItem.get(item) ?? new Set()).add(artifactId));
      }
      expect(idsByItem.size).toBe(distinct);
      for (const ids of idsByItem.values()) expect(ids.size).toBe(1);

      if (dialect === 'sqlite') {
        const raw = new Database(db, { readonly: true });
        expect(raw.pragma('integrity_check', { simple: true })).toBe('ok');
        raw.close();
      }
      expect(await count(store, 'artifacts')).toBe(distinct);
      const shas = await store
        .raw()
        .selectFrom('artifacts')
        .select((eb) => eb.fn.count<number>('sha256').distinct().as('n'))
        .executeTakeFirstOrThrow();
      expect(Number(shas.n)).toBe(distinct);
      expect(await count(store, 'artifact_observations')).toBe(800);

      await using vault = await createVault({ ...store.location });
      for (const [item, ids] of idsByItem) {
        const [id] = [...ids];
        const page = await vault.page(id!, 0, 20_000);
        expect(page.nextOffset).toBeNull();
        expect(page.content).toBe(overlappingContent(item));
      }
      expect((await vault.usage()).artifacts).toBe(distinct);
    });

    it('a lease race across 6 processes has exactly one inline winner', async () => {
      const { store, db } = await fresh('lease.sqlite3');
      const setup = await createVault({ ...store.location });
      const { artifactId } = await setup.put({ content: 'contested evidence', toolName: 'terminal' });
      await setup.close();
      const results = await runTogether(
        'claim-worker.ts',
        [0, 1, 2, 3, 4, 5].map((k) => [db, 'session-1', artifactId, `req-${k}`, '1']),
        join(dir, `go-claims-${dialect}`),
      );
      for (const r of results) {
        expect(r.stderr).toBe('');
        expect(r.code).toBe(0);
      }
      expect(results.map((r) => r.stdout.trim()).filter((o) => o === 'true')).toHaveLength(1);
      expect(results.map((r) => r.stdout.trim()).filter((o) => o === 'false')).toHaveLength(5);
      expect(await count(store, 'artifact_exposures')).toBe(1);
    });
  });
}
