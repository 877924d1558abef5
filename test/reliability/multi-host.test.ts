/**
 * Multi-host simulation on PostgreSQL (issue 16): six processes, each its own runtime and pool,
 * stand in for hosts sharing one vault. A fixed amount of work (not wall time; the long soak is a
 * benchmark): per round, unpinned filler for retention pressure, a direct lease race, a session
 * every host replays (sharing its history decisions through the store) and one of its own. Then every host recovers the
 * receipts ANOTHER host delivered. 0 errors, 0 lost artifacts, exactly one winner per lease.
 *
 * A proxy replica serving a session another replica started is proxy-replicas.test.ts (two
 * gateway processes on one PostgreSQL store); this test shows the storage half of it: any process
 * continues any session from the store alone.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { freshSchema } from '../support/postgres.js';
import { createVault } from '../../src/vault/index.js';
import { fixture, repoRoot, tempDir } from './harness.js';
import { writeFileSync } from 'node:fs';

const HOSTS = 6;
const ROUNDS = 2;
const { dir, cleanup } = tempDir('tt-rel-hosts-');
afterAll(cleanup);

interface HostReport {
  host: number;
  items: number;
  receipts: number;
  peerReceipts: number;
  peerRecovered: number;
  peerIsolated: number;
  problems: string[];
  failedOpen: string[];
  leaseWins: Record<string, boolean>;
  pruned: number;
}

function startHost(
  url: string,
  host: number,
  capacity: number,
  go1: string,
  go2: string,
  onLine: (line: string) => void,
) {
  const out = join(dir, `host-${host}`);
  const peer = join(dir, `host-${(host + 1) % HOSTS}`);
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', fixture('host-worker.ts'), url, String(host), String(ROUNDS), out, peer, go1, go2],
    {
      cwd: repoRoot,
      env: { ...process.env, TT_SIM_CAPACITY: String(capacity) },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let stdout = '';
  let stderr = '';
  let buffer = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    stdout += d;
    buffer += d;
    for (let nl = buffer.indexOf('\n'); nl >= 0; nl = buffer.indexOf('\n')) {
      onLine(buffer.slice(0, nl));
      buffer = buffer.slice(nl + 1);
    }
  });
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe.skipIf(inject('pgUrl') === '')('six hosts on one PostgreSQL vault', () => {
  it('replay concurrently with lease races and retention pressure: 0 errors, 0 lost artifacts, one winner per lease, receipts recover on another host', async () => {
    const schema = await freshSchema(inject('pgUrl'), 'hosts');
    try {
      // Sized from a run: all hosts' session evidence is ≈ 45 % of it, the filler pushes it past the
      // high water again and again, and retention always finds older unpinned filler to prune.
      const capacity = 1_600_000;
      const go1 = join(dir, 'go1');
      const go2 = join(dir, 'go2');
      const seen = { ready: 0, done: 0 };
      const runs = Array.from({ length: HOSTS }, (_, host) =>
        startHost(schema.url, host, capacity, go1, go2, (line) => {
          if (line === 'ready' && ++seen.ready === HOSTS) writeFileSync(go1, 'go');
          if (line === 'done' && ++seen.done === HOSTS) writeFileSync(go2, 'go');
        }),
      );
      const finished = await Promise.all(runs);
      const reports: HostReport[] = finished.map((f, host) => {
        expect(f.stderr, `host ${host} stderr`).toBe('');
        expect(f.code, `host ${host} exit code`).toBe(0);
        return JSON.parse(f.stdout.trim().split('\n').pop() ?? '{}') as HostReport;
      });
      for (const r of reports) {
        expect(r.problems, `host ${r.host}`).toEqual([]);
        expect(r.failedOpen, `host ${r.host}: no stage failed open`).toEqual([]);
        expect(r.receipts, `host ${r.host} delivered receipts`).toBeGreaterThan(0);
        expect(
          r.peerRecovered,
          `host ${r.host} recovered every receipt of host ${(r.host + 1) % HOSTS} in its session`,
        ).toBe(r.peerReceipts);
        expect(r.peerIsolated, `no other session on host ${r.host} could read them`).toBe(r.peerReceipts);
      }
      for (let round = 0; round < ROUNDS; round++) {
        expect(
          reports.filter((r) => r.leaseWins[`race-${round}`] === true),
          `lease race ${round}`,
        ).toHaveLength(1);
      }

      await using vault = await createVault({ url: schema.url });
      const db = (vault as unknown as { path: string }).path; // location only, for the message
      const usage = await vault.usage();
      expect(usage.prunedArtifacts, `retention pruned under pressure (${db})`).toBeGreaterThan(0);
      expect(usage.bytes).toBeLessThanOrEqual(capacity);
      // The store itself: no (session, artifact) with two inline leases, no content stored twice.
      const { Kysely, PostgresDialect, sql } = await import('kysely');
      const pg = (await import('pg')).default;
      const raw = new Kysely<unknown>({
        dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: schema.url, max: 1 }) }),
      });
      try {
        const doubled = await sql<{
          n: number;
        }>`SELECT COUNT(*)::int AS n FROM (SELECT 1 FROM artifact_exposures WHERE inline = 1 GROUP BY session_id, artifact_id HAVING COUNT(*) > 1) d`.execute(
          raw,
        );
        expect(doubled.rows[0]?.n).toBe(0);
        const dupes = await sql<{
          n: number;
        }>`SELECT COUNT(*)::int AS n FROM (SELECT sha256 FROM artifacts GROUP BY sha256 HAVING COUNT(*) > 1) d`.execute(
          raw,
        );
        expect(dupes.rows[0]?.n).toBe(0);
        // The request stages claim no leases since fidelity first (a lease receipt would point at content the
        // conversation may not show); the direct race is what claims them: one inline exposure per race, in the store too.
        const raced = await sql<{
          session_id: string;
          n: number;
        }>`SELECT session_id, COUNT(*)::int AS n FROM artifact_exposures WHERE session_id LIKE 'race-%' AND inline = 1 GROUP BY session_id ORDER BY session_id`.execute(
          raw,
        );
        expect(raced.rows).toEqual(
          Array.from({ length: ROUNDS }, (_, round) => ({ session_id: `race-${round}`, n: 1 })),
        );
        // The sessions every host replayed had their history decisions shared through the store.
        const shared = await sql<{
          n: number;
        }>`SELECT COUNT(*)::int AS n FROM session_renderings WHERE session_id LIKE 'shared-%'`.execute(raw);
        expect(shared.rows[0]?.n).toBeGreaterThan(0);
        const total = reports.reduce((n, r) => n + r.receipts, 0);
        console.log(
          `multi-host: ${HOSTS} hosts × ${ROUNDS} rounds, ${reports.reduce((n, r) => n + r.items, 0)} facade calls, ${total} receipts (each recovered by another host), ${usage.prunedArtifacts} artifacts pruned, ${raced.rows.length} lease races with one winner each`,
        );
      } finally {
        await raw.destroy();
      }
    } finally {
      await schema.drop();
    }
  }, 600_000);
});
