/**
 * `npm run bench -- soak [--seconds N] [--processes N] [--capacity BYTES] [--ttl S] [--lanes N] [--long-turns N]`:
 * the reliability soak of issue 14. N processes (default 6), each its own Terminator, share one
 * bounded SQLite vault (default 16 MB, retention active) for a wall-clock time (default 600 s),
 * each running `--lanes` (3) sessions at a time: the reliability workload under new ids and
 * variants plus a large output of its own (≈ 200 kB, delivered) and unpinned filler (≈ 200 kB),
 * most ended with `endSession`, every fifth abandoned (its pins age out with the session TTL,
 * default 60 s). Reports:
 *
 * - receipts lost: receipts that reached an output and did not recover while their session was
 *   live (must be 0);
 * - the vault's artifact bytes and file size sampled over time (must stay bounded);
 * - E_VAULT_CAPACITY failures after the warm-up (the first 10 % of the time; must be 0);
 * - then one session of `--long-turns` (1,500) turns on a bounded vault in a process of its own
 *   (--expose-gc): JS heap at the end within 10 % of the heap after the warm-up (turn 100).
 *
 * Not a test: it takes as long as it is told to; the figures go into RELIABILITY.md.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';

const root = resolve(fileURLToPath(new URL('..', import.meta.url)));

function flag(argv: readonly string[], name: string, fallback: number): number {
  const i = argv.indexOf(name);
  const v = i >= 0 ? Number(argv[i + 1]) : NaN;
  return Number.isFinite(v) && v >= 0 ? v : fallback;
}

interface WorkerReport {
  worker: number;
  sessions: number;
  abandoned: number;
  calls: number;
  receipts: number;
  lost: number;
  capacityDuringWarmup: number;
  capacityAfterWarmup: number;
  failedOpen: Record<string, number>;
  problems: string[];
}

function run(
  args: readonly string[],
  nodeFlags: readonly string[] = [],
): Promise<{ code: number | null; out: string; err: string }> {
  const child = spawn(process.execPath, [...nodeFlags, '--import', 'tsx', ...args], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  return new Promise((r) => child.on('close', (code) => r({ code, out, err })));
}

const mb = (n: number): string => `${(n / 1_000_000).toFixed(2)} MB`;

export async function main(argv: string[]): Promise<void> {
  const seconds = flag(argv, '--seconds', 600);
  const processes = flag(argv, '--processes', 6);
  const capacity = flag(argv, '--capacity', 16_000_000);
  const ttl = flag(argv, '--ttl', 60);
  const lanes = flag(argv, '--lanes', 3);
  const longTurns = flag(argv, '--long-turns', 1500);
  const warmup = Math.max(1, Math.round(seconds / 10));
  const dir = mkdtempSync(join(tmpdir(), 'tt-bench-soak-'));
  const path = join(dir, 'vault.sqlite3');
  try {
    console.log(
      `soak: ${processes} processes × ${lanes} sessions at a time, ${seconds} s, one SQLite vault of ${mb(capacity)} (high/low water 90/80 %), session TTL ${ttl} s, warm-up ${warmup} s`,
    );
    const samples: { t: number; bytes: number; artifacts: number; file: number; wal: number; released: number }[] = [];
    const started = Date.now();
    const sample = (): void => {
      if (!existsSync(path)) return;
      try {
        const db = new Database(path, { readonly: true, timeout: 1000 });
        const meta = Object.fromEntries(
          (db.prepare('SELECT key, value FROM vault_meta').all() as { key: string; value: number }[]).map((r) => [
            r.key,
            Number(r.value),
          ]),
        );
        db.close();
        const wal = existsSync(`${path}-wal`) ? statSync(`${path}-wal`).size : 0;
        samples.push({
          t: (Date.now() - started) / 1000,
          bytes: meta['artifact_bytes'] ?? 0,
          artifacts: meta['artifact_count'] ?? 0,
          file: statSync(path).size,
          wal,
          released: meta['released_sessions'] ?? 0,
        });
      } catch {
        // the vault is being created, or locked for a moment: next sample
      }
    };
    const timer = setInterval(sample, 2000);
    const results = await Promise.all(
      Array.from({ length: processes }, (_, w) =>
        run([
          join(root, 'bench/_soak-worker.ts'),
          path,
          String(w),
          String(seconds),
          String(capacity),
          String(ttl),
          String(warmup),
          String(lanes),
        ]),
      ),
    );
    clearInterval(timer);
    sample();
    const reports = results.map((r, w) => {
      if (r.code !== 0) throw new Error(`soak worker ${w} exited with ${r.code}: ${r.err.slice(0, 2000)}`);
      return JSON.parse(r.out.trim().split('\n').pop() ?? '{}') as WorkerReport;
    });
    const sum = (f: (r: WorkerReport) => number): number => reports.reduce((n, r) => n + f(r), 0);
    const labels: Record<string, number> = {};
    for (const r of reports) for (const [k, v] of Object.entries(r.failedOpen)) labels[k] = (labels[k] ?? 0) + v;
    const { integrity, rows, pages } = (() => {
      const db = new Database(path, { readonly: true });
      const ok = db.pragma('integrity_check', { simple: true });
      const count = (t: string): number => Number(db.prepare(`SELECT COUNT(*) FROM ${t}`).pluck().get());
      const tables = [
        'artifacts',
        'artifact_access',
        'vault_sessions',
        'session_renderings',
        'request_metrics',
        'request_component_metrics',
        'terminal_baselines',
        'artifact_observations',
      ];
      const counted = Object.fromEntries(tables.map((t) => [t, count(t)]));
      const free = Number(db.pragma('freelist_count', { simple: true }));
      const total = Number(db.pragma('page_count', { simple: true }));
      db.close();
      return { integrity: ok, rows: counted, pages: { total, free } };
    })();
    const wall = (Date.now() - started) / 1000;
    const maxBytes = Math.max(...samples.map((s) => s.bytes));
    // "Bounded" is judged once the vault first reached its high water (retention working from then on).
    const fullFrom = samples.findIndex((s) => s.bytes >= 0.85 * capacity);
    const late = fullFrom < 0 ? samples : samples.slice(fullFrom);
    console.log(
      `wall ${wall.toFixed(0)} s; sessions ${sum((r) => r.sessions)} (${sum((r) => r.abandoned)} abandoned, left to the TTL); facade calls ${sum((r) => r.calls)} (${(sum((r) => r.calls) / wall).toFixed(1)}/s)`,
    );
    console.log(`receipts ${sum((r) => r.receipts)}, lost ${sum((r) => r.lost)} (must be 0)`);
    console.log(
      `E_VAULT_CAPACITY: ${sum((r) => r.capacityDuringWarmup)} during the warm-up, ${sum((r) => r.capacityAfterWarmup)} after it (must be 0)`,
    );
    console.log(
      `failed_open by stage and error: ${
        Object.keys(labels).length === 0
          ? 'none'
          : Object.entries(labels)
              .sort()
              .map(([k, v]) => `${k}×${v}`)
              .join(', ')
      }`,
    );
    console.log(
      `other problems: ${sum((r) => r.problems.length)}${reports
        .flatMap((r) => r.problems)
        .slice(0, 5)
        .map((p) => `\n  ${p}`)
        .join('')}`,
    );
    console.log(
      `vault artifact bytes: max ${mb(maxBytes)} of ${mb(capacity)} (${((100 * maxBytes) / capacity).toFixed(1)} %); ${fullFrom < 0 ? 'never reached the high water' : `from the first time near the high water (${late[0]!.t.toFixed(0)} s) min ${mb(Math.min(...late.map((s) => s.bytes)))}, max ${mb(Math.max(...late.map((s) => s.bytes)))}`}; database file max ${mb(Math.max(...samples.map((s) => s.file)))} (${pages.total} pages, ${pages.free} free at the end), -wal max ${mb(Math.max(...samples.map((s) => s.wal)))}; sessions released by retention ${samples.at(-1)?.released ?? 0}; integrity ${String(integrity)}`,
    );
    console.log(
      `  rows at the end: ${Object.entries(rows)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')}`,
    );
    const every = Math.max(1, Math.round(samples.length / 12));
    console.log(
      `  over time (s: artifact MB / database file MB / -wal MB): ${samples
        .filter((_, i) => i % every === 0 || i === samples.length - 1)
        .map(
          (s) =>
            `${s.t.toFixed(0)}: ${(s.bytes / 1e6).toFixed(1)}/${(s.file / 1e6).toFixed(1)}/${(s.wal / 1e6).toFixed(1)}`,
        )
        .join(', ')}`,
    );

    if (longTurns > 0) {
      const long = await run(
        [join(root, 'bench/_soak-long.ts'), dir, String(longTurns), String(capacity), '40'],
        ['--expose-gc'],
      );
      if (long.code !== 0) throw new Error(`long session exited with ${long.code}: ${long.err.slice(0, 2000)}`);
      const l = JSON.parse(long.out.trim().split('\n').pop() ?? '{}') as {
        turns: number;
        warm: number;
        warmHeap: number;
        endHeap: number;
        ratio: number;
        warmCaches: number;
        endCaches: number;
        marks: { turn: number; heap: number; caches: number }[];
        seconds: number;
        vaultBytes: number;
        pruned: number;
      };
      const mib = (n: number): string => `${(n / 1048576).toFixed(2)} MiB`;
      console.log(
        `\none session of ${l.turns} turns on a ${mb(capacity)} vault (${l.seconds.toFixed(0)} s; the host keeps a 40-turn window): heap after warm-up (turn ${l.warm}) ${mib(l.warmHeap)}, at the end ${mib(l.endHeap)}: ${((l.ratio - 1) * 100).toFixed(1)} % (must be within 10 %)`,
      );
      const mid = l.marks.find((m) => m.turn === 500);
      if (mid !== undefined)
        console.log(
          `  from turn 500 (${mib(mid.heap)}) to the end: ${((l.endHeap / mid.heap - 1) * 100).toFixed(1)} %`,
        );
      console.log(
        `  heap by turn: ${l.marks.map((m) => `${m.turn}: ${mib(m.heap)}`).join(', ')}; vault ${mb(l.vaultBytes)}, pruned ${l.pruned}`,
      );
      console.log(
        `  (before each measurement the bounded tokenizer merge cache was emptied: it held ${mib(l.warmCaches)} after the warm-up, ${mib(l.endCaches)} at the end)`,
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
