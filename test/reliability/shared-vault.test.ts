/**
 * Shared vault (issue 8, item 4): four `token-terminator replay --db <one file>` processes run
 * different sessions at the same time, plus one session id they all replay (a race on the
 * session's history decisions, which live in the vault). 0 errors, every receipt in every dumped
 * request recovers exactly, content stored once, integrity ok, and in every process every request
 * refers only to what that process's conversation was shown (the newest output always inline).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import type { ProviderRequest } from '../../src/step.js';
import { danglingReferences, shownArtifacts } from '../../src/testing/index.js';
import { createVault } from '../../src/vault/index.js';
import { artifactIdFor } from '../../src/vault/index.js';
import { buildWorkload, writeSessions, type Workload } from '../fixtures/reliability/workload.js';
import { CLI, idMatches, receiptIds, repoRoot, runToEnd, tempDir } from './harness.js';

const { dir, cleanup } = tempDir('tt-rel-shared-');
afterAll(cleanup);

const PROCESSES = 4;

function sampleSession(id: string): Workload {
  const line = readFileSync(join(repoRoot, 'examples', 'sessions', 'sample.jsonl'), 'utf8').split('\n')[0]!;
  return { ...(JSON.parse(line) as Workload), id };
}

describe('four replay processes on one vault file', () => {
  it('finish with 0 errors, deduplicated content, no dangling reference and exact recovery', async () => {
    const db = join(dir, 'shared.sqlite3');
    const shared = buildWorkload({ id: 'shared-session', variant: 9 });
    const runs = Array.from({ length: PROCESSES }, (_, k) => {
      const file = join(dir, `sessions-${k}.jsonl`);
      // Every process: the common session first (they race on its history decisions), then its own ones.
      writeSessions(file, [
        shared,
        buildWorkload({ id: `own-${k}`, variant: k }),
        ...(k < 2 ? [sampleSession(`sample-${k}`)] : []),
      ]);
      const dump = join(dir, `dump-${k}.jsonl`);
      return {
        file,
        dump,
        done: runToEnd(process.execPath, [CLI, 'replay', file, '--db', db, '--json', '--dump', dump], {
          ...process.env,
          TOKEN_TERMINATOR_RTK_PATH: '',
        }),
      };
    });
    const finished = await Promise.all(runs.map((r) => r.done));

    let receipts = 0;
    for (const [k, out] of finished.entries()) {
      expect(out.stderr, `process ${k} stderr`).toBe('');
      expect(out.code, `process ${k} exit code`).toBe(0);
      const figures = JSON.parse(out.stdout) as {
        receipts: number;
        recovered_exact: number;
        recovery_failures: number;
        requests: number;
      };
      expect(figures.recovery_failures).toBe(0);
      expect(figures.recovered_exact).toBe(figures.receipts);
      expect(figures.receipts).toBeGreaterThan(0);
      receipts += figures.receipts;
    }

    const raw = new Database(db, { readonly: true });
    try {
      expect(raw.pragma('integrity_check', { simple: true })).toBe('ok');
      // Content-addressed: no content stored twice.
      expect(
        raw
          .prepare('SELECT COUNT(*) FROM (SELECT sha256 FROM artifacts GROUP BY sha256 HAVING COUNT(*) > 1)')
          .pluck()
          .get(),
      ).toBe(0);
      // The search output every variant shares was stored once and observed by every session that saw it.
      const search = shared.messages.find(
        (m) => m['role'] === 'tool' && String(m['content']).startsWith('src/parser/module_0.ts'),
      )!;
      const searchId = artifactIdFor(String(search['content']));
      expect(raw.prepare('SELECT COUNT(*) FROM artifacts WHERE artifact_id = ?').pluck().get(searchId)).toBe(1);
      const sessions = raw
        .prepare('SELECT COUNT(DISTINCT session_id) FROM artifact_observations WHERE artifact_id = ?')
        .pluck()
        .get(searchId) as number;
      expect(sessions).toBe(PROCESSES + 1);
      // The raced session's history decisions were shared through the vault.
      const raced = raw
        .prepare("SELECT COUNT(*) FROM session_renderings WHERE session_id = 'shared-session'")
        .pluck()
        .get() as number;
      expect(raced).toBeGreaterThan(0);
      console.log(
        `shared vault: ${PROCESSES} processes, ${receipts} receipts recovered, ${String(raw.prepare('SELECT COUNT(*) FROM artifacts').pluck().get())} artifacts, ${raced} shared history decisions, search output observed by ${sessions} sessions`,
      );
    } finally {
      raw.close();
    }

    // In every process, every request refers only to what its own conversation was shown.
    for (const r of runs) {
      const shown = new Map<string, Set<string>>();
      for (const line of readFileSync(r.dump, 'utf8').split('\n').filter(Boolean)) {
        const { session, index, final } = JSON.parse(line) as {
          session: string;
          index: number;
          final: ProviderRequest;
        };
        const seen = shown.get(session) ?? new Set<string>();
        shown.set(session, seen);
        expect(danglingReferences(final, seen), `${r.dump} ${session} #${index}`).toEqual([]);
        for (const id of shownArtifacts(final)) seen.add(id);
      }
    }

    // Every receipt in every dumped request recovers exactly from the shared file.
    await using vault = await createVault({ path: db });
    const ids = new Set<string>();
    for (const r of runs)
      for (const line of readFileSync(r.dump, 'utf8').split('\n').filter(Boolean))
        for (const id of receiptIds(JSON.parse(line))) ids.add(id);
    expect(ids.size).toBeGreaterThan(0);
    for (const id of ids) {
      const parts: string[] = [];
      for (let offset: number | null = 0; offset !== null;) {
        const page = await vault.page(id, offset);
        parts.push(page.content);
        offset = page.nextOffset;
      }
      expect(idMatches(id, parts.join('')), id).toBe(true);
    }
  });
});
