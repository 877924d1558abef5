/**
 * `npm run bench -- hosts [--seconds N] [--hosts N] [--capacity BYTES]`: the multi-host soak. N processes (default 6),
 * each its own runtime and pool on one PostgreSQL vault, replay sessions for a wall-clock time
 * (default 60 s) with lease races, retention pressure and cross-host recovery (the same worker as
 * test/reliability/multi-host.test.ts, which does a fixed amount of work instead). Prints calls/s,
 * receipts, receipts another host could not recover (must be 0), lease-race winners and pruning.
 * PostgreSQL: TOKEN_TERMINATOR_BENCH_PG_URL when set, else a throw-away local cluster.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freshSchema, startCluster, stopCluster } from '../test/support/postgres.js';

const root = resolve(fileURLToPath(new URL('..', import.meta.url)));

function flag(argv: readonly string[], name: string, fallback: number): number {
  const i = argv.indexOf(name);
  const v = i >= 0 ? Number(argv[i + 1]) : NaN;
  return Number.isFinite(v) && v > 0 ? v : fallback;
}

export async function main(argv: string[]): Promise<void> {
  const seconds = flag(argv, '--seconds', 60);
  const hosts = flag(argv, '--hosts', 6);
  // Small enough that unpinned filler is pruned again and again (retention pressure), as in the test.
  const capacity = flag(argv, '--capacity', 3_000_000);
  const dir = mkdtempSync(join(tmpdir(), 'tt-bench-hosts-'));
  let clusterDir: string | undefined;
  let url = process.env['TOKEN_TERMINATOR_BENCH_PG_URL'] ?? '';
  if (url === '') {
    clusterDir = mkdtempSync(join(tmpdir(), 'tt-bench-hosts-pg-'));
    url = (await startCluster(clusterDir)).url;
  }
  const schema = await freshSchema(url, 'soak');
  try {
    const go1 = join(dir, 'go1');
    const go2 = join(dir, 'go2');
    let ready = 0;
    let done = 0;
    const started = Date.now();
    const runs = Array.from({ length: hosts }, (_, host) => {
      const child = spawn(
        process.execPath,
        [
          '--import',
          'tsx',
          join(root, 'test/fixtures/reliability/host-worker.ts'),
          schema.url,
          String(host),
          '0',
          join(dir, `host-${host}`),
          join(dir, `host-${(host + 1) % hosts}`),
          go1,
          go2,
        ],
        {
          cwd: root,
          env: { ...process.env, TT_SIM_SECONDS: String(seconds), TT_SIM_CAPACITY: String(capacity) },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let out = '';
      let err = '';
      child.stdout.setEncoding('utf8').on('data', (d: string) => {
        out += d;
        if (d.includes('ready\n') && ++ready === hosts) writeFileSync(go1, 'go');
        if (d.includes('done\n') && ++done === hosts) writeFileSync(go2, 'go');
      });
      child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
      return new Promise<{ out: string; err: string }>((r) => child.on('close', () => r({ out, err })));
    });
    const results = await Promise.all(runs);
    const reports = results.map(
      (r) =>
        JSON.parse(r.out.trim().split('\n').pop() ?? '{}') as {
          rounds: number;
          items: number;
          receipts: number;
          peerReceipts: number;
          peerRecovered: number;
          problems: string[];
          failedOpen: string[];
          leaseWins: Record<string, boolean>;
          pruned: number;
        },
    );
    const wall = (Date.now() - started) / 1000;
    const items = reports.reduce((n, r) => n + r.items, 0);
    const lost = reports.reduce((n, r) => n + (r.peerReceipts - r.peerRecovered), 0);
    const races = Object.keys(reports[0]?.leaseWins ?? {});
    const badRaces = races.filter((k) => reports.filter((r) => r.leaseWins[k] === true).length !== 1).length;
    console.log(
      `soak: ${hosts} hosts × ${seconds} s on PostgreSQL (vault capacity ${(capacity / 1e6).toFixed(1)} MB); wall ${wall.toFixed(0)} s; load average ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')}`,
    );
    console.log(
      `facade calls ${items} (${(items / seconds).toFixed(1)}/s), rounds ${reports.map((r) => r.rounds).join('/')}`,
    );
    console.log(
      `receipts ${reports.reduce((n, r) => n + r.receipts, 0)}, recovered on another host ${reports.reduce((n, r) => n + r.peerRecovered, 0)}, lost ${lost}`,
    );
    const problems = reports.flatMap((r, host) => r.problems.map((p) => `host ${host}: ${p}`));
    for (const p of problems.slice(0, 8)) console.log(`  problem: ${p.slice(0, 300)}`);
    for (const r of results) if (r.err !== '') console.log(`  stderr: ${r.err.slice(0, 300)}`);
    console.log(
      `lease races ${races.length}, with other than one winner ${badRaces}; failed_open sessions ${reports.reduce((n, r) => n + r.failedOpen.length, 0)}; problems ${reports.reduce((n, r) => n + r.problems.length, 0)}; pruned ${Math.max(...reports.map((r) => r.pruned))}; stderr ${results.filter((r) => r.err !== '').length} hosts`,
    );
  } finally {
    await schema.drop();
    rmSync(dir, { recursive: true, force: true });
    if (clusterDir !== undefined) stopCluster(clusterDir);
  }
}
