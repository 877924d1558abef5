/**
 * `token-terminator vault migrate --from PATH --to URL` (issue 16): the real CLI copies a SQLite
 * vault into a PostgreSQL schema, verifies every artifact by hash, and the copy serves the same
 * evidence, leases, pins, baselines, renderings, metrics and working state. A target holding a
 * forged row under a source id fails the verification (exit 1).
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { createVault } from '../../src/vault/index.js';
import { freshSchema } from '../support/postgres.js';

const ROOT = resolve(import.meta.dirname, '..', '..');
const dir = mkdtempSync(join(tmpdir(), 'tt-migrate-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = { PATH: process.env['PATH'] ?? '', HOME: dir };
  return new Promise((done) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'src/cli/main.ts', ...args],
      { cwd: ROOT, env },
      (error, stdout, stderr) => {
        done({ code: error ? (typeof error.code === 'number' ? error.code : -1) : 0, stdout, stderr });
      },
    );
  });
}

/** A content digest with stored token counts (the count store moves with the vault). */
const COUNTED = createHash('sha256').update('a counted item').digest('base64');
const CONTENTS = [
  'plain evidence line\n'.repeat(200),
  'Straße FEHLER Übergröße 😀 𝔘𝔫𝔦𝔠𝔬𝔡𝔢\n'.repeat(50),
  'nul \u0000 inside, exact bytes kept',
  JSON.stringify({ status: 'failed', n: 2 }),
];

describe('vault migrate', () => {
  it.skipIf(inject('pgUrl') === '')(
    'copies a SQLite vault into PostgreSQL, verifies every artifact by hash, and the copy serves the same evidence',
    async () => {
      const path = join(dir, 'source.sqlite3');
      const ids: string[] = [];
      {
        await using v = await createVault({ path });
        for (const [i, content] of CONTENTS.entries())
          ids.push(
            (
              await v.put({
                content,
                toolName: i === 0 ? 'terminal' : 'read_file',
                sessionId: 's1',
                callId: `c${i}`,
                args: { i },
              })
            ).artifactId,
          );
        await v.put({ content: CONTENTS[0]!, toolName: 'terminal', sessionId: 's2', callId: 'again' });
        await v.pin([ids[0]!]);
        expect(await v.claimExposure('s1', ids[1]!, 'r1', 1)).toBe(true);
        await v.setBaseline('cwd|git status', ids[2]!);
        await v.setRendering('s1', 'catalog', 'routed catalog');
        await v.recordRequestMetric({
          sessionId: 's1',
          requestId: 'r1',
          mode: 'balanced',
          rawChars: 100,
          finalChars: 40,
          receipts: 2,
          failedOpen: false,
          components: { tool_results: { raw: 30, final: 5 } },
        });
        await v.workingState.apply('s1', [{ op: 'NODE_CREATE', node_id: 'n1', kind: 'fact', label: 'kept' }]);
        await v.recordTokenCounts('tiktoken:o200k_base/2000', [{ hash: COUNTED, compact: 321, mid: 324 }]);
      }
      const target = await freshSchema(inject('pgUrl'), 'migrate');
      try {
        const run = await cli(['vault', 'migrate', '--from', path, '--to', target.url, '--json']);
        expect(run.stderr).toBe('');
        expect(run.code).toBe(0);
        const report = JSON.parse(run.stdout) as {
          ok: boolean;
          artifacts: number;
          verified: number;
          mismatches: string[];
          rows: Record<string, number>;
          to: string;
        };
        expect(report).toMatchObject({
          ok: true,
          artifacts: CONTENTS.length,
          verified: CONTENTS.length,
          mismatches: [],
        });
        expect(report.rows).toMatchObject({
          artifact_observations: 5,
          artifact_access: CONTENTS.length + 2,
          vault_sessions: 2,
          artifact_exposures: 1,
          terminal_baselines: 1,
          session_renderings: 1,
          request_metrics: 1,
          working_state_entities: 1,
          working_state_events: 1,
          token_counts: 1,
        });

        await using pgVault = await createVault({ url: target.url });
        for (const [i, id] of ids.entries()) {
          expect((await pgVault.page(id)).content).toBe(CONTENTS[i]);
          expect(await pgVault.verify(id)).toBe(true);
        }
        expect((await pgVault.summary(ids[0]!))?.observationCount).toBe(2);
        expect((await pgVault.search('ÜBERGRÖSSE')).map((r) => r.artifactId)).toEqual([ids[1]]);
        expect(await pgVault.exposureAvailable('s1', ids[1]!, 'r2', 1)).toBe(false);
        expect((await pgVault.getBaseline('cwd|git status'))?.artifactId).toBe(ids[2]);
        expect(await pgVault.getRendering('s1', 'catalog')).toBe('routed catalog');
        expect((await pgVault.tokenCounts('tiktoken:o200k_base/2000', [COUNTED])).get(COUNTED)).toEqual({
          compact: 321,
          mid: 324,
        });
        expect(await pgVault.metricsSummary()).toMatchObject({
          requests: 1,
          raw_chars: 100,
          receipts: 2,
          components: { tool_results: { raw_tokens: 30, final_tokens: 5 } },
        });
        expect(JSON.stringify(await pgVault.workingState.get('s1', { includeRetired: false, limit: 10 }))).toContain(
          'kept',
        );
        expect((await pgVault.usage()).artifacts).toBe(CONTENTS.length);

        // Running it again keeps what is there and verifies again.
        const again = JSON.parse(
          (await cli(['vault', 'migrate', '--from', path, '--to', target.url, '--json'])).stdout,
        ) as { ok: boolean; alreadyThere: number };
        expect(again).toMatchObject({ ok: true, alreadyThere: CONTENTS.length });
      } finally {
        await target.drop();
      }
    },
  );

  it.skipIf(inject('pgUrl') === '')('fails (exit 1) when an artifact does not verify on the target', async () => {
    const path = join(dir, 'source2.sqlite3');
    let id: string;
    {
      await using v = await createVault({ path });
      id = (await v.put({ content: 'genuine evidence' })).artifactId;
    }
    const target = await freshSchema(inject('pgUrl'), 'migrate');
    try {
      {
        // The target already holds a different row under the same id (a forged or damaged copy).
        await (await createVault({ url: target.url })).close(); // creates the tables
        const pg = (await import('pg')).default;
        const client = new pg.Client({ connectionString: target.url });
        await client.connect();
        await client.query(
          `INSERT INTO artifacts (artifact_id, sha256, char_count, byte_count, tool_name, created_at, last_observed_at, content)
           VALUES ($1, $2, 6, 6, '', '2020-01-01T00:00:00.000Z', '2020-01-01T00:00:00.000Z', $3)`,
          [id, 'f'.repeat(64), Buffer.from('forged')],
        );
        await client.end();
      }
      const run = await cli(['vault', 'migrate', '--from', path, '--to', target.url]);
      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(/1 artifacts failed verification/);
      expect(run.stderr).toContain(id);
    } finally {
      await target.drop();
    }
  });
});
