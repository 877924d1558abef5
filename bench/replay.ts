/**
 * `npm run bench -- replay [sessions.jsonl] [--mode m] [--limit n] [--json]`: replays recorded
 * sessions with the default mode (balanced) and prints every figure, next to a baseline replay in
 * mode `off` measured in the same run (same sizes; its timing is the harness's own cost) and to
 * the Python reference's figures on corpus A.
 */
import { performance } from 'node:perf_hooks';
import { MODES } from '../src/config/index.js';
import type { Mode } from '../src/config/types.js';
import { readSessions, renderFiguresTable, replaySessions, type ReplayFigures } from '../src/replay/index.js';

/** The Python reference on the 40 sessions of corpus A (chars), and our targets. */
const REFERENCE = { reduction_pct_chars: 24.06, cache_prefix_ratio_raw: 0.928, cache_prefix_ratio_final: 0.912, effective_cost_ratio: 0.827, p50_ms: 4.32 };

function flag(argv: string[], name: string): string | undefined {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
}

export async function main(argv: string[]): Promise<void> {
  const path = argv.find((a, i) => !a.startsWith('--') && (i === 0 || !argv[i - 1]!.startsWith('--'))) ?? 'examples/sessions/sample.jsonl';
  const modeArg = flag(argv, '--mode') ?? 'balanced';
  if (!(MODES as readonly string[]).includes(modeArg)) throw new Error(`bench replay: unknown mode ${modeArg}`);
  const mode = modeArg as Mode;
  const limit = Number(flag(argv, '--limit') ?? Infinity);
  const sessions = await readSessions(path, limit);
  console.log(`replay bench: ${sessions.length} sessions from ${path}, mode ${mode}`);

  const t0 = performance.now();
  const baseline = await replaySessions(sessions, { mode: 'off', ledger: false });
  const t1 = performance.now();
  const ours = await replaySessions(sessions, { mode });
  const t2 = performance.now();

  if (argv.includes('--json')) {
    console.log(JSON.stringify({ mode, baseline: strip(baseline), figures: strip(ours), wall_ms: { baseline: t1 - t0, ours: t2 - t1 } }));
    return;
  }
  console.log(renderFiguresTable({ ...ours, sessions: [] }));
  const charsPct = ours.raw_chars === 0 ? 0 : ((ours.raw_chars - ours.final_chars) / ours.raw_chars) * 100;
  const rows: [string, string, string, string][] = [
    ['reduction (tokens)', `${ours.reduction_pct.toFixed(2)} %`, '—', '≥ 50 %'],
    ['reduction (chars)', `${charsPct.toFixed(2)} %`, `${REFERENCE.reduction_pct_chars} %`, '≥ 50 %'],
    ['cache prefix ratio raw', ours.cache_prefix_ratio_raw.toFixed(4), REFERENCE.cache_prefix_ratio_raw.toFixed(3), ''],
    ['cache prefix ratio final', ours.cache_prefix_ratio_final.toFixed(4), REFERENCE.cache_prefix_ratio_final.toFixed(3), `≥ ${(ours.cache_prefix_ratio_raw - 0.01).toFixed(4)}`],
    ['effective cost ratio', ours.effective_cost_ratio.toFixed(4), REFERENCE.effective_cost_ratio.toFixed(3), '≤ 0.60'],
    ['p50 ms per request', ours.p50_ms.toFixed(3), REFERENCE.p50_ms.toFixed(2), `< ${REFERENCE.p50_ms}`],
    ['p95 ms per request', ours.p95_ms.toFixed(3), '—', ''],
    ['recovery failures', String(ours.recovery_failures), '—', '0'],
  ];
  console.log('\nfigure                      ours         reference   target');
  for (const [name, a, b, c] of rows) console.log(`${name.padEnd(27)} ${a.padEnd(12)} ${b.padEnd(11)} ${c}`);
  console.log(
    `\nbaseline (mode off, same run): p50 ${baseline.p50_ms.toFixed(3)} ms, total ${baseline.total_ms.toFixed(1)} ms; ours/baseline pipeline time ×${(ours.total_ms / Math.max(baseline.total_ms, 1e-9)).toFixed(1)}; wall ${((t2 - t1) / 1000).toFixed(1)} s vs ${((t1 - t0) / 1000).toFixed(1)} s`,
  );
}

function strip(f: ReplayFigures): Omit<ReplayFigures, 'sessions'> & { sessions: number } {
  return { ...f, sessions: f.sessions.length };
}
