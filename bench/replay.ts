/**
 * `npm run bench -- replay [sessions.jsonl] [--mode m] [--limit n] [--json] [--compare-counting]`:
 * replays recorded sessions with the default mode (balanced) and prints every figure against the
 * targets of docs/fidelity.md, plus the diagnostic probe (the captured failing runs of
 * test/fixtures/terminal replayed the same way; corpus A has no diagnostic line in a large output),
 * next to a baseline replay in mode `off` measured in the same run (same sizes; its timing is the harness's
 * own cost) and to the Python reference's figures on corpus A.
 *
 * Beside p50/p95 it prints, per request, the same-run time of tokenizing that request's new
 * content once with tiktoken (WASM, no memo): the raw tool outputs that arrived since the
 * previous request plus the compact JSON of the other new messages, timed outside the pipeline's
 * timed sections. The pipeline's own time is each request's time minus that; its p95 is printed.
 * A request's telemetry (the ledger turn: both sides measured, one commit) runs after the call
 * answered (`Terminator.settled()`), and vault maintenance that is due runs at a turn of the event
 * loop with no reduction in flight: both are timed on their own after each request (settled() and
 * two turns of the event loop, where a host waits for the model) and printed beside the call's
 * figures. The own-time p95 is the call's critical path, without them; replay's own p50/p95 (the
 * figures table, `--against`) still include them.
 * `--compare-counting` replays again with each counting engine (tiktoken WASM, the default JS
 * engine) and prints their p50/p95 side by side.
 *
 * Then a generated session of parallel tool calls (bench/parallel-session.ts: three calls per
 * assistant message, results in a shuffled order; `--parallel-turns`, 60) beside its single-call
 * twin of the same size, replayed alike: p50/p95 per request and their ratio (a request's time
 * includes the tool results that arrived since the previous one: three against one).
 *
 * `--against <commit>` measures an earlier commit in the same run: its tree (`git archive`) in a
 * temp directory sharing this checkout's node_modules, its own replay bench run with `--json` in a
 * child process, and this tree's the same way right after it, `--against-rounds` times (3),
 * alternating, before this one's replay. Both sides run alike: this tree timed in the parent
 * process beside a child gave a p95 ratio of 1.17 against itself. Printed: both p50/p95 (means of
 * the rounds), the ratios, and whether every non-timing figure is identical.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { MODES } from '../src/config/index.js';
import type { Mode } from '../src/config/types.js';
import {
  acquireEncoder,
  canonicalJson,
  countGuarded,
  createTiktokenCounter,
  type EncoderEngine,
} from '../src/measure/index.js';
import { diagnosticLines } from '../src/measure/diagnostic-ruler.js';
import { DIAGNOSTIC_MIN_CHARS } from '../src/replay/fidelity.js';
import { percentile } from '../src/replay/figures.js';
import { FIXTURE_COMMANDS } from '../test/fixtures/terminal/commands.js';
import { readSessions, renderFiguresTable, replaySessions, type ReplayFigures } from '../src/replay/index.js';
import type { RecordedSession } from '../src/replay/sessions.js';
import { createTerminator, type Terminator } from '../src/runtime/index.js';
import { callsSession } from './parallel-session.js';

/** The Python reference on the 40 sessions of corpus A (chars), and our targets. */
const REFERENCE = {
  reduction_pct_chars: 24.06,
  cache_prefix_ratio_raw: 0.928,
  cache_prefix_ratio_final: 0.912,
  effective_cost_ratio: 0.827,
  p50_ms: 4.32,
};

function flag(argv: string[], name: string): string | undefined {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
}

export async function main(argv: string[]): Promise<void> {
  const path =
    argv.find((a, i) => !a.startsWith('--') && (i === 0 || !argv[i - 1]!.startsWith('--'))) ??
    'examples/sessions/sample.jsonl';
  const modeArg = flag(argv, '--mode') ?? 'balanced';
  if (!(MODES as readonly string[]).includes(modeArg)) throw new Error(`bench replay: unknown mode ${modeArg}`);
  const mode = modeArg as Mode;
  const limit = Number(flag(argv, '--limit') ?? Infinity);
  const sessions = await readSessions(path, limit);
  console.log(`replay bench: ${sessions.length} sessions from ${path}, mode ${mode}`);

  const against = flag(argv, '--against');
  const rounds = Number(flag(argv, '--against-rounds') ?? 3);
  if (!Number.isSafeInteger(rounds) || rounds < 1)
    throw new Error('bench replay: --against-rounds must be a positive integer');
  const [earlier, children]: [Earlier[], Earlier[]] = [[], []];
  const checkout = against === undefined ? undefined : materialize(against);
  try {
    for (let r = 0; checkout !== undefined && r < rounds; r++) {
      earlier.push(runTree(checkout, path, mode, limit));
      children.push(runTree(process.cwd(), path, mode, limit));
    }
    const t0 = performance.now();
    const baseline = await replaySessions(sessions, { mode: 'off', ledger: false });
    const t1 = performance.now();
    const timed = await timedReplay(sessions, mode, 'js', windowFlags(argv));
    const t2 = performance.now();
    await report(argv, mode, sessions, baseline, timed, [t0, t1, t2]);
    if (!argv.includes('--json')) await parallelCalls(mode, Number(flag(argv, '--parallel-turns') ?? 60));
    if (checkout !== undefined) printAgainst(against!, earlier, children, timed);
  } finally {
    if (checkout !== undefined) rmSync(checkout, { recursive: true, force: true });
  }
}

/** `--window N [--reserve R] [--dump file]`: replay under a budgeting window (docs/window.md). */
interface WindowFlags {
  readonly window?: number;
  readonly reserve?: number;
  readonly dump?: string;
}

function windowFlags(argv: string[]): WindowFlags {
  const n = (name: string): number | undefined => {
    const v = flag(argv, name);
    if (v === undefined) return undefined;
    const x = Number(v);
    if (!Number.isSafeInteger(x) || x < 1) throw new Error(`bench replay: ${name} must be a positive integer`);
    return x;
  };
  const window = n('--window');
  const reserve = n('--reserve');
  const dump = flag(argv, '--dump');
  if (reserve !== undefined && window === undefined) throw new Error('bench replay: --reserve needs --window');
  return {
    ...(window === undefined ? {} : { window }),
    ...(reserve === undefined ? {} : { reserve }),
    ...(dump === undefined ? {} : { dump }),
  };
}

interface Earlier {
  readonly figures: Omit<ReplayFigures, 'sessions'> & { sessions: number };
  readonly wallMs: number;
}

/** The window figures (`--window`): requests over W − R raw and sent, the fit's rewrites. */
function windowRows(f: ReplayFigures, mark: (ok: boolean) => string): [string, string, string, string][] {
  if (f.requests_over_window_raw === undefined) return [];
  return [
    ['requests over window (raw)', String(f.requests_over_window_raw), '—', ''],
    [
      'requests over window (sent)',
      String(f.requests_over_window_sent),
      '—',
      `0 where they fit  ${mark((f.requests_over_window_sent ?? 0) <= (f.requests_window_unfittable ?? 0))}`,
    ],
    ['window rewrites', String(f.window_rewrites), '—', ''],
    ['window exceeded (cannot fit)', String(f.requests_window_unfittable), '—', ''],
  ];
}

/** The tree of `commit` in a temp directory, with this checkout's node_modules linked in. */
function materialize(commit: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'tt-bench-against-'));
  const tar = execFileSync('git', ['archive', '--format=tar', commit], { maxBuffer: 1 << 30 });
  const untar = spawnSync('tar', ['-x', '-C', dir], { input: tar });
  if (untar.status !== 0) throw new Error(`bench replay: could not unpack ${commit}: ${untar.stderr.toString()}`);
  if (!existsSync(join(dir, 'node_modules')))
    symlinkSync(join(process.cwd(), 'node_modules'), join(dir, 'node_modules'), 'dir');
  return dir;
}

/** The replay bench of the tree in `dir` (same sessions, mode and counting set-up), in a child process. */
function runTree(dir: string, path: string, mode: Mode, limit: number): Earlier {
  const args = [
    'tsx',
    'bench/run.ts',
    'replay',
    resolve(path),
    '--mode',
    mode,
    '--json',
    ...(Number.isFinite(limit) ? ['--limit', String(limit)] : []),
  ];
  const out = spawnSync('npx', args, { cwd: dir, encoding: 'utf8', maxBuffer: 1 << 28 });
  const line = out.stdout.split('\n').find((l) => l.startsWith('{'));
  if (out.status !== 0 || line === undefined)
    throw new Error(`bench replay: the bench of ${dir} failed: ${out.stderr.slice(-2000)}`);
  const parsed = JSON.parse(line) as { figures: Earlier['figures']; wall_ms: { ours: number } };
  return { figures: parsed.figures, wallMs: parsed.wall_ms.ours };
}

/** Figures that are not timings (they must not change with speed work). */
function behaviour(f: object): Record<string, unknown> {
  return Object.fromEntries(Object.entries(f).filter(([k]) => !/(_ms$|^ms|rss|^sessions$)/.test(k)));
}

function printAgainst(commit: string, earlier: readonly Earlier[], children: readonly Earlier[], timed: Timed): void {
  const mean = (runs: readonly Earlier[], g: (e: Earlier) => number): number =>
    runs.reduce((n, e) => n + g(e), 0) / runs.length;
  const [p50, p95] = [mean(earlier, (e) => e.figures.p50_ms), mean(earlier, (e) => e.figures.p95_ms)];
  const [o50, o95] = [mean(children, (e) => e.figures.p50_ms), mean(children, (e) => e.figures.p95_ms)];
  const ours = timed.figures;
  console.log(
    `\nagainst ${commit} (each tree's replay bench in a child process, alternating, same run, ${earlier.length} round(s)):`,
  );
  console.log(`  ${''.padEnd(20)} ${'p50 ms'.padStart(8)} ${'p95 ms'.padStart(8)}`);
  console.log(`  ${commit.padEnd(20)} ${p50.toFixed(3).padStart(8)} ${p95.toFixed(3).padStart(8)}`);
  console.log(`  ${'this tree'.padEnd(20)} ${o50.toFixed(3).padStart(8)} ${o95.toFixed(3).padStart(8)}`);
  console.log(
    `  p95 ratio this / ${commit}: ${(o95 / p95).toFixed(3)} (below 1: this tree is faster); p50 ratio ${(o50 / p50).toFixed(3)}; each round's p95 ratio: ${earlier.map((e, i) => (children[i]!.figures.p95_ms / e.figures.p95_ms).toFixed(3)).join(', ')}`,
  );
  const a = behaviour(earlier[0]!.figures);
  const b = behaviour(ours);
  const changed = [...new Set([...Object.keys(a), ...Object.keys(b)])].filter(
    (k) => JSON.stringify(a[k]) !== JSON.stringify(b[k]),
  );
  console.log(
    changed.length === 0
      ? `  every other figure identical (${Object.keys(b).length} figures: reduction, cost ratios, prefix reuse, fidelity counts, receipts…)`
      : `  figures that differ: ${changed.map((k) => `${k} ${JSON.stringify(a[k])} → ${JSON.stringify(b[k])}`).join('; ')}`,
  );
}

async function report(
  argv: readonly string[],
  mode: Mode,
  sessions: readonly RecordedSession[],
  baseline: ReplayFigures,
  timed: Timed,
  [t0, t1, t2]: readonly [number, number, number],
): Promise<void> {
  const ours = timed.figures;

  const probe = await diagnosticProbe(mode);
  if (argv.includes('--json')) {
    console.log(
      JSON.stringify({
        mode,
        baseline: strip(baseline),
        figures: strip(ours),
        diagnostic_probe: strip(probe),
        wall_ms: { baseline: t1 - t0, ours: t2 - t1 },
      }),
    );
    return;
  }
  console.log(renderFiguresTable({ ...ours, sessions: [] }));
  const charsPct = ours.raw_chars === 0 ? 0 : ((ours.raw_chars - ours.final_chars) / ours.raw_chars) * 100;
  const corpus = corpusDiagnostics(sessions);
  const mark = (ok: boolean): string => (ok ? 'met' : 'NOT MET');
  const rows: [string, string, string, string][] = [
    ['reduction (tokens)', `${ours.reduction_pct.toFixed(2)} %`, '—', `≥ 40 %  ${mark(ours.reduction_pct >= 40)}`],
    ['reduction (chars)', `${charsPct.toFixed(2)} %`, `${REFERENCE.reduction_pct_chars} %`, ''],
    [
      'effective cost ratio (openai)',
      ours.effective_cost_ratio_openai.toFixed(4),
      REFERENCE.effective_cost_ratio.toFixed(3),
      `≤ 0.55  ${mark(ours.effective_cost_ratio_openai <= 0.55)}`,
    ],
    [
      'effective cost ratio (anthropic)',
      ours.effective_cost_ratio_anthropic.toFixed(4),
      '—',
      `≤ 0.58  ${mark(ours.effective_cost_ratio_anthropic <= 0.58)}`,
    ],
    [
      'cost with recoveries (openai)',
      ours.effective_cost_with_recoveries_ratio_openai.toFixed(4),
      '0.858',
      `≤ 0.72  ${mark(ours.effective_cost_with_recoveries_ratio_openai <= 0.72)}`,
    ],
    [
      'cost with recoveries (anthropic)',
      ours.effective_cost_with_recoveries_ratio_anthropic.toFixed(4),
      '—',
      `≤ 0.74  ${mark(ours.effective_cost_with_recoveries_ratio_anthropic <= 0.74)}`,
    ],
    [
      'lines in sight at use',
      `${ours.use_lines_pct.toFixed(2)} % (${ours.fidelity.use_lines_visible}/${ours.fidelity.use_lines})`,
      '92 %',
      `≥ 99  ${mark(ours.use_lines_pct >= 99)}`,
    ],
    [
      'words in sight at use',
      `${ours.use_words_pct.toFixed(2)} % (${ours.fidelity.use_words_visible}/${ours.fidelity.use_words})`,
      '92 %',
      `≥ 97  ${mark(ours.use_words_pct >= 97)}`,
    ],
    [
      'actions missing a used line',
      `${ours.actions_missing_use_pct.toFixed(2)} % (${ours.fidelity.use_actions_missing_line}/${ours.fidelity.use_actions})`,
      '—',
      '',
    ],
    ['simulated recoveries', String(ours.simulated_recoveries), '—', ''],
    ['prefix reuse', ours.prefix_reuse.toFixed(4), '—', `≥ 0.97  ${mark(ours.prefix_reuse >= 0.97)}`],
    ['task visible', `${ours.task_visible_pct.toFixed(2)} %`, '100 %', `100  ${mark(ours.task_visible_pct === 100)}`],
    [
      'actions visible',
      `${ours.actions_visible_pct.toFixed(2)} %`,
      '100 %',
      `100  ${mark(ours.actions_visible_pct === 100)}`,
    ],
    [
      'diagnostics visible',
      `${ours.diagnostics_visible_pct.toFixed(2)} % (${ours.fidelity.diagnostic_lines_visible}/${ours.fidelity.diagnostic_lines})`,
      '—',
      `≥ 99.5  ${mark(ours.diagnostics_visible_pct >= 99.5)}`,
    ],
    [
      '  same, diagnostic probe',
      `${probe.diagnostics_visible_pct.toFixed(2)} % (${probe.fidelity.diagnostic_lines_visible}/${probe.fidelity.diagnostic_lines})`,
      '—',
      `≥ 99.5  ${mark(probe.diagnostics_visible_pct >= 99.5 && probe.fidelity.diagnostic_lines > 0)}`,
    ],
    [
      'grounding',
      `${ours.grounding_pct.toFixed(2)} % (${ours.fidelity.grounding_strings_visible}/${ours.fidelity.grounding_strings})`,
      '—',
      `≥ 99  ${mark(ours.grounding_pct >= 99)}`,
    ],
    [
      'cache prefix ratio raw / final',
      `${ours.cache_prefix_ratio_raw.toFixed(4)} / ${ours.cache_prefix_ratio_final.toFixed(4)}`,
      `${REFERENCE.cache_prefix_ratio_raw.toFixed(3)} / ${REFERENCE.cache_prefix_ratio_final.toFixed(3)}`,
      '',
    ],
    ['p50 ms per request', ours.p50_ms.toFixed(3), REFERENCE.p50_ms.toFixed(2), ''],
    ['p95 ms per request', ours.p95_ms.toFixed(3), '—', ''],
    ['recovery failures', String(ours.recovery_failures), '—', `0  ${mark(ours.recovery_failures === 0)}`],
    ...windowRows(ours, mark),
  ];
  console.log('\nfigure                             ours                  reference     target            ');
  for (const [name, a, b, c] of rows) console.log(`${name.padEnd(34)} ${a.padEnd(21)} ${b.padEnd(13)} ${c}`);
  console.log(
    `\ndiagnostic lines in the replayed sessions: ${corpus.big} tool outputs of ≥ ${DIAGNOSTIC_MIN_CHARS} chars, ${corpus.bigWithLines} with a diagnostic line; ` +
      `${corpus.withLines} outputs of any size have one (the largest ${corpus.largestWithLines} chars).`,
  );
  console.log(
    `diagnostic probe: the ${probe.outputs} captured terminal outputs of test/fixtures/terminal (${probe.failing} failing runs) replayed as one mini-swe-agent session (observations in its <returncode>/<output> template) and as one tool-call session, same mode.`,
  );
  printTiming('default counting (engine js)', timed);
  if (argv.includes('--compare-counting')) {
    // Same order twice, reversed the second time, so machine load and warm caches favour no one.
    const setups: [string, EncoderEngine][] = [
      ['tiktoken WASM', 'wasm'],
      ['engine js (default)', 'js'],
    ];
    const runs = new Map<string, Timed[]>();
    for (const order of [setups, [...setups].reverse()]) {
      for (const [label, engine] of order) {
        const r = await timedReplay(sessions, mode, engine);
        runs.set(label, [...(runs.get(label) ?? []), r]);
      }
    }
    console.log('\ncounting set-ups, same run (mean of 2 replays each, in alternating order):');
    console.log(
      `${'set-up'.padEnd(46)} ${'p50 ms'.padStart(8)} ${'p95 ms'.padStart(8)} ${'own p95'.padStart(8)} ${'total s'.padStart(8)}`,
    );
    for (const [label] of setups) {
      const rs = runs.get(label)!;
      const mean = (f: (t: Timed) => number): number => rs.reduce((n, r) => n + f(r), 0) / rs.length;
      console.log(
        `${label.padEnd(46)} ${mean((r) => r.figures.p50_ms)
          .toFixed(2)
          .padStart(8)} ${mean((r) => r.figures.p95_ms)
          .toFixed(2)
          .padStart(8)} ${mean((r) => r.ownP95)
          .toFixed(2)
          .padStart(8)} ${(mean((r) => r.figures.total_ms) / 1000).toFixed(1).padStart(8)}`,
      );
    }
  }
  console.log(
    `\nbaseline (mode off, same run): p50 ${baseline.p50_ms.toFixed(3)} ms, total ${baseline.total_ms.toFixed(1)} ms; ours/baseline pipeline time ×${(ours.total_ms / Math.max(baseline.total_ms, 1e-9)).toFixed(1)}; wall ${((t2 - t1) / 1000).toFixed(1)} s vs ${((t1 - t0) / 1000).toFixed(1)} s`,
  );
}

/**
 * The diagnostic probe: corpus A has no diagnostic line in any output of 4,000 chars or more, so
 * `diagnostics_visible_pct` measures nothing there. The probe replays the real captured runs of
 * test/fixtures/terminal (most of them failing: pytest, tracebacks, Maven, javac, tsc, ESLint,
 * npm, Go, cargo, vitest) through the same pipeline, as a text-protocol session and as a tool-call
 * session, and measures the same figure on them.
 */
async function diagnosticProbe(mode: Mode): Promise<ReplayFigures & { outputs: number; failing: number }> {
  const dir = join(dirname(fileURLToPath(import.meta.url)), '../test/fixtures/terminal');
  const names = Object.keys(FIXTURE_COMMANDS).sort();
  const task = {
    role: 'user',
    content: 'The build is red. Find out why and fix it; run the failing commands again when you are done.',
  };
  const text: Record<string, unknown>[] = [
    { role: 'system', content: 'You are a coding agent. Reply with exactly one ```bash block per turn.' },
    task,
  ];
  const calls: Record<string, unknown>[] = [
    { role: 'system', content: 'You are a coding agent with a bash tool.' },
    task,
  ];
  names.forEach((name, i) => {
    const { command, exitCode = 0 } = FIXTURE_COMMANDS[name]!;
    const output = readFileSync(join(dir, name), 'utf8');
    text.push(
      { role: 'assistant', content: `Next: ${name}.\n\n\`\`\`bash\n${command}\n\`\`\`` },
      { role: 'user', content: `<returncode>${exitCode}</returncode>\n<output>\n${output}\n</output>` },
    );
    calls.push(
      {
        role: 'assistant',
        content: `Next: ${name}.`,
        tool_calls: [
          { id: `c${i}`, type: 'function', function: { name: 'bash', arguments: JSON.stringify({ command }) } },
        ],
      },
      { role: 'tool', tool_call_id: `c${i}`, content: output },
    );
  });
  const done = { role: 'assistant', content: 'Done.' };
  const figures = await replaySessions(
    [
      { id: 'probe:text-protocol', model: 'gpt-4o', messages: [...text, done] },
      { id: 'probe:tool-calls', model: 'gpt-4o', messages: [...calls, done] },
    ],
    { mode, ledger: false },
  );
  return {
    ...figures,
    outputs: names.length,
    failing: names.filter((n) => (FIXTURE_COMMANDS[n]!.exitCode ?? 0) !== 0).length,
  };
}

/** How many tool outputs of the replayed sessions have diagnostic lines at all (the measure's reach). */
function corpusDiagnostics(sessions: readonly RecordedSession[]): {
  big: number;
  bigWithLines: number;
  withLines: number;
  largestWithLines: number;
} {
  const out = { big: 0, bigWithLines: 0, withLines: 0, largestWithLines: 0 };
  for (const s of sessions) {
    for (const m of s.messages) {
      if (m['role'] !== 'tool' || typeof m['content'] !== 'string') continue;
      const content = m['content'];
      const has = diagnosticLines(content, 1).length > 0;
      if (content.length >= DIAGNOSTIC_MIN_CHARS) out.big++;
      if (!has) continue;
      out.withLines++;
      if (content.length >= DIAGNOSTIC_MIN_CHARS) out.bigWithLines++;
      out.largestWithLines = Math.max(out.largestWithLines, content.length);
    }
  }
  return out;
}

function strip(f: ReplayFigures): Omit<ReplayFigures, 'sessions'> & { sessions: number } {
  return { ...f, sessions: f.sessions.length };
}

interface Timed {
  readonly figures: ReplayFigures;
  /** Per request: pipeline ms (as replay counts it) and tiktoken ms for its new content. */
  readonly ms: number[];
  readonly tokenizeMs: number[];
  /** Per request: what runs after the call answered (`settled()`: both sides measured, the ledger turn; due vault maintenance). */
  readonly deferredMs: number[];
  readonly ownP95: number;
}

/**
 * Replay through a Terminator wrapped to time each request the way replay does (tool results
 * since the previous request + the request) and to remember that request's new content, which is
 * tokenized with tiktoken in `onProgress`, after replay's timed section.
 */
async function timedReplay(
  sessions: readonly RecordedSession[],
  mode: Mode,
  engine: EncoderEngine,
  w: WindowFlags = {},
): Promise<Timed> {
  const dir = mkdtempSync(join(tmpdir(), 'tt-bench-replay-'));
  const counter = createTiktokenCounter('o200k_base', { engine });
  const figuresCounter = createTiktokenCounter('o200k_base', { engine: 'wasm' });
  const reference = acquireEncoder('o200k_base', 'wasm');
  const incontext = {
    ...(w.window === undefined ? {} : { compressionWindowTokens: w.window }),
    ...(w.reserve === undefined ? {} : { minOutputTokens: w.reserve }),
  };
  const tt = await createTerminator({
    overrides: { dbPath: join(dir, 'artifacts.sqlite3'), mode, ...(w.window === undefined ? {} : { incontext }) },
    counter,
    metrics: false,
    vaultErrors: 'throw',
  });
  const ms: number[] = [];
  const tokenizeMs: number[] = [];
  const deferredMs: number[] = [];
  const pendingMs = new Map<string, number>();
  const pendingText = new Map<string, string[]>();
  const seen = new Map<string, number>();
  let newContent: string[] = [];
  const add = (session: string, text: string): void =>
    void pendingText.set(session, [...(pendingText.get(session) ?? []), text]);
  const reduceRequest: Terminator['reduceRequest'] = async (request, context, signal) => {
    const t0 = performance.now();
    const out = await tt.reduceRequest(request, context, signal);
    ms.push(performance.now() - t0 + (pendingMs.get(context.sessionId) ?? 0));
    pendingMs.delete(context.sessionId);
    // What follows the call while a host waits for the model: the request's telemetry (the ledger
    // turn, run after the call answered) and a turn of the event loop, in which vault maintenance
    // that is due (WAL checkpoint, search indexing; src/vault/idle.ts) runs between two calls
    // rather than inside the next one. Timed on its own (replay's own figures include it).
    const d0 = performance.now();
    await tt.settled();
    for (let hop = 0; hop < 2; hop++) await new Promise((resolve) => setImmediate(resolve));
    deferredMs.push(performance.now() - d0);
    const messages = Array.isArray(request['messages']) ? (request['messages'] as unknown[]) : [];
    for (const m of messages.slice(seen.get(context.sessionId) ?? 0)) {
      if ((m as { role?: unknown }).role !== 'tool') add(context.sessionId, canonicalJson(m, { compact: true }));
    }
    seen.set(context.sessionId, messages.length);
    newContent = pendingText.get(context.sessionId) ?? [];
    pendingText.delete(context.sessionId);
    return out;
  };
  const wrapped: Terminator = {
    ...tt,
    reduceToolResult: async (result, context, signal) => {
      const t0 = performance.now();
      const out = await tt.reduceToolResult(result, context, signal);
      pendingMs.set(context.sessionId, (pendingMs.get(context.sessionId) ?? 0) + performance.now() - t0);
      add(context.sessionId, result.content);
      return out;
    },
    reduceRequest,
  };
  try {
    const figures = await replaySessions(sessions, {
      terminator: wrapped,
      counter: figuresCounter,
      ledger: false,
      ...w,
      onProgress: () => {
        const t0 = performance.now();
        for (const text of newContent) countGuarded(text, reference.count);
        tokenizeMs.push(performance.now() - t0);
        newContent = [];
      },
    });
    const own = ms.map((m, i) => m - (tokenizeMs[i] ?? 0)).sort((a, b) => a - b);
    return { figures, ms, tokenizeMs, deferredMs, ownP95: percentile(own, 95) };
  } finally {
    await tt.close();
    counter.dispose?.();
    figuresCounter.dispose?.();
    reference.release();
    rmSync(dir, { recursive: true, force: true });
  }
}

function printTiming(label: string, t: Timed): void {
  const sorted = (xs: readonly number[]): number[] => [...xs].sort((a, b) => a - b);
  const whole = sorted(t.ms);
  const tok = sorted(t.tokenizeMs);
  const own = sorted(t.ms.map((m, i) => m - (t.tokenizeMs[i] ?? 0)));
  console.log(`\nper request, ${label} (${t.ms.length} requests):`);
  console.log(`  ${''.padEnd(52)} ${'p50 ms'.padStart(8)} ${'p95 ms'.padStart(8)}`);
  const row = (name: string, xs: number[]): void =>
    console.log(
      `  ${name.padEnd(52)} ${percentile(xs, 50).toFixed(3).padStart(8)} ${percentile(xs, 95).toFixed(3).padStart(8)}`,
    );
  row('pipeline (tool results since the last request + request)', whole);
  row("tiktoken WASM on the request's new content, once", tok);
  row("pipeline's own time (pipeline − that tokenization)", own);
  const deferred = sorted(t.deferredMs);
  const total = deferred.reduce((n, x) => n + x, 0);
  row('after the call: telemetry + due vault maintenance', deferred);
  row('own time + after the call', sorted(t.ms.map((m, i) => m - (t.tokenizeMs[i] ?? 0) + (t.deferredMs[i] ?? 0))));
  console.log(
    `  after the call (ledger turn, WAL checkpoints, search indexing): ${(total / Math.max(1, deferred.length)).toFixed(3)} ms per request on average, ${(total / 1000).toFixed(2)} s in all; a host runs it while it waits for the model`,
  );
  console.log(
    `  pipeline's own time p95 ${percentile(own, 95).toFixed(3)} ms (target ≤ 5 ms; the call's critical path, without what runs after the call)`,
  );
}

/** The parallel-call fixture and its single-call twin, replayed in `mode`: p50 / p95 per request and their ratio. */
async function parallelCalls(mode: Mode, turns: number): Promise<void> {
  const figures = [];
  for (const calls of [1, 3]) {
    const { top, messages } = callsSession({ turns, calls, run: ` (replay ${calls})` });
    const session: RecordedSession = { id: `generated-${calls}-calls`, model: String(top['model']), messages };
    figures.push(await replaySessions([session], { mode, ledger: false }));
  }
  const [one, three] = figures as [ReplayFigures, ReplayFigures];
  console.log(`\nparallel tool calls (generated, ${turns} requests, results shuffled), mode ${mode}:`);
  console.log(`  single-call session: p50 ${one.p50_ms.toFixed(2)} ms, p95 ${one.p95_ms.toFixed(2)} ms`);
  console.log(`  3 calls per message: p50 ${three.p50_ms.toFixed(2)} ms, p95 ${three.p95_ms.toFixed(2)} ms`);
  console.log(
    `  p50 ratio ${(three.p50_ms / one.p50_ms).toFixed(2)} (target ≤ 1.5), p95 ratio ${(three.p95_ms / one.p95_ms).toFixed(2)}`,
  );
}
