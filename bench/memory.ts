/**
 * `npm run bench -- memory [--sessions n] [--turns n] [--waves n] [--long-turns n] [--snapshot]`:
 * per-session memory through `createTerminator` (reduceToolResult + compileRequest, default
 * mode, SQLite vault on a temp file), measured as JS heap after forced GC. Re-runs itself under
 * `--expose-gc` when started without it.
 *
 * 1. `--sessions` (200) concurrent sessions of `--turns` (30) turns each (every turn: one tool
 *    result through the tool stream, then the request as the host would send it, rebuilt from
 *    JSON like every HTTP request). Heap after all of them finished, minus the heap of the warmed
 *    Terminator before: bytes per live session (their lanes are all still subscribed).
 * 2. `--waves` (4) more waves of as many new sessions: the runtime's lane LRU (maxSessions set to
 *    one wave) evicts the finished ones, holding 1.5 waves at most. Heap after each wave: growth
 *    per finished session is the slope over these waves (0 when nothing outlives eviction).
 * 3. One session of `--long-turns` (1,500) turns: heap at the end vs after warm-up (turn 100).
 *
 * The process-wide token-count memo is emptied before every measurement so that it (bounded,
 * reported on its own) does not count as session memory. `--snapshot` also writes V8 heap
 * snapshots before and after the waves and prints the constructors whose retained count grew.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { writeHeapSnapshot } from 'node:v8';
import { clearSharedCountMemo, sharedCountMemoStats } from '../src/measure/index.js';
import { createTerminator, type Terminator } from '../src/runtime.js';
import type { ProviderRequest } from '../src/step.js';

function flag(argv: readonly string[], name: string, fallback: number): number {
  const i = argv.indexOf(name);
  return i >= 0 ? Number(argv[i + 1]) : fallback;
}

const gc = (): void => {
  const f = (globalThis as { gc?: () => void }).gc!;
  for (let i = 0; i < 4; i++) f();
};

/** JS heap after GC, with the process-wide count memo emptied first (reported separately). */
function heap(): number {
  clearSharedCountMemo();
  gc();
  return process.memoryUsage().heapUsed;
}

/** A deterministic tool output for (session, turn): mostly small, now and then large. */
function output(session: number, t: number): string {
  const lines = t % 9 === 4 ? 420 : 12 + ((t * 7 + session) % 30);
  return Array.from(
    { length: lines },
    (_, i) =>
      `src/pkg_${session % 17}/mod_${t % 11}.ts:${i + 1}: export const v${i}_${session} = run(${t}, ${i}); // s${session} t${t}`,
  ).join('\n');
}

/** One simulated agent session: its transcript, and one step (tool result + request) per turn. */
class Session {
  readonly id: string;
  readonly #messages: Record<string, unknown>[];
  #turn = 0;

  constructor(readonly index: number) {
    this.id = `mem-${index}`;
    this.#messages = [
      { role: 'system', content: 'You are a careful coding agent. Use the tools; keep answers short.' },
      { role: 'user', content: `Task ${index}: make the failing build pass and explain the cause.` },
    ];
  }

  async step(tt: Terminator): Promise<void> {
    const t = this.#turn++;
    const callId = `call_${this.index}_${t}`;
    const args = { path: `src/pkg_${this.index % 17}/mod_${t % 11}.ts` };
    this.#messages.push({
      role: 'assistant',
      content: `Turn ${t}: reading the module.`,
      tool_calls: [{ id: callId, type: 'function', function: { name: 'read_file', arguments: JSON.stringify(args) } }],
    });
    const reduced = await tt.reduceToolResult(
      { callId, name: 'read_file', args, content: output(this.index, t) },
      { sessionId: this.id },
    );
    this.#messages.push({ role: 'tool', tool_call_id: callId, content: reduced.value.content });
    const request: ProviderRequest = {
      model: 'gpt-4o',
      messages: JSON.parse(JSON.stringify(this.#messages)) as unknown[],
    };
    await tt.reduceRequest(request, { sessionId: this.id, requestId: `${this.id}#${t}` });
  }
}

async function runWave(tt: Terminator, first: number, count: number, turns: number): Promise<void> {
  const sessions = Array.from({ length: count }, (_, i) => new Session(first + i));
  for (let t = 0; t < turns; t++) await Promise.all(sessions.map((s) => s.step(tt)));
}

const kb = (n: number): string => `${(n / 1024).toFixed(1)} KiB`;
const mib = (n: number): string => `${(n / 1048576).toFixed(2)} MiB`;

/** Self sizes and counts per constructor name in a heap snapshot file. */
function summarize(path: string): Map<string, { count: number; size: number }> {
  const snap = JSON.parse(readFileSync(path, 'utf8')) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
    nodes: number[];
    strings: string[];
  };
  const fields = snap.snapshot.meta.node_fields;
  const width = fields.length;
  const [typeAt, nameAt, sizeAt] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f)) as [
    number,
    number,
    number,
  ];
  const types = snap.snapshot.meta.node_types[0];
  const out = new Map<string, { count: number; size: number }>();
  for (let i = 0; i < snap.nodes.length; i += width) {
    const type = types[snap.nodes[i + typeAt]!]!;
    const name = type === 'object' || type === 'closure' ? snap.strings[snap.nodes[i + nameAt]!]! : `(${type})`;
    const e = out.get(name) ?? { count: 0, size: 0 };
    e.count++;
    e.size += snap.nodes[i + sizeAt]!;
    out.set(name, e);
  }
  return out;
}

function snapshotDiff(before: string, after: string): void {
  const a = summarize(before);
  const b = summarize(after);
  const rows = [...b]
    .map(([name, e]) => ({ name, count: e.count - (a.get(name)?.count ?? 0), size: e.size - (a.get(name)?.size ?? 0) }))
    .sort((x, y) => y.size - x.size);
  console.log('  heap snapshot diff (after the waves − before), top 12 by self size:');
  for (const r of rows.slice(0, 12))
    console.log(
      `    ${r.name.slice(0, 48).padEnd(48)} ${String(r.count).padStart(8)} objects ${kb(r.size).padStart(12)}`,
    );
}

async function sessionsBench(argv: readonly string[], dir: string): Promise<void> {
  const count = flag(argv, '--sessions', 200);
  const turns = flag(argv, '--turns', 30);
  const waves = flag(argv, '--waves', 4);
  if (count <= 0) return;
  // maxSessions = one wave: the lane LRU (3 × maxSessions lanes; these sessions use 2 lanes
  // each) then keeps at most 1.5 waves, so from the second wave on the old ones are evicted.
  const tt = await createTerminator({ overrides: { dbPath: join(dir, 'sessions.sqlite3') }, maxSessions: count });
  const kept = Math.floor((3 * count) / 2);
  try {
    await runWave(tt, 1_000_000, 2, turns); // warm-up: counters, vault statements, JIT
    const h0 = heap();
    const t0 = performance.now();
    await runWave(tt, 0, count, turns);
    const memo = sharedCountMemoStats();
    const h1 = heap();
    console.log(
      `\n${count} concurrent sessions × ${turns} turns (${((performance.now() - t0) / 1000).toFixed(1)} s; process-wide count memo before emptying: ${memo.entries} entries, ${memo.keyChars} key chars)`,
    );
    console.log(`  heap of the warmed Terminator: ${mib(h0)}; with ${count} finished-but-live sessions: ${mib(h1)}`);
    console.log(`  per live session: ${kb((h1 - h0) / count)}`);
    const snapBefore = argv.includes('--snapshot') ? writeHeapSnapshot(join(dir, 'before.heapsnapshot')) : undefined;
    const after: number[] = [];
    for (let w = 1; w <= waves; w++) {
      await runWave(tt, w * count, count, turns);
      after.push(heap());
      const total = (w + 1) * count;
      console.log(
        `  after wave ${w + 1}: ${total} sessions ended, ${Math.min(total, kept)} of them still in the lane LRU: ${mib(after[after.length - 1]!)}`,
      );
    }
    if (after.length >= 2) {
      const slope = (after[after.length - 1]! - after[0]!) / ((after.length - 1) * count);
      console.log(`  per finished (evicted) session, slope over waves 2–${waves + 1}: ${slope.toFixed(0)} bytes`);
    }
    if (snapBefore !== undefined) snapshotDiff(snapBefore, writeHeapSnapshot(join(dir, 'after.heapsnapshot')));
  } finally {
    await tt.close();
  }
}

async function longSessionBench(argv: readonly string[], dir: string): Promise<void> {
  const turns = flag(argv, '--long-turns', 1500);
  if (turns <= 0) return;
  const tt = await createTerminator({ overrides: { dbPath: join(dir, 'long.sqlite3') } });
  try {
    const session = new Session(7);
    const warm = Math.min(100, Math.floor(turns / 2));
    const t0 = performance.now();
    for (let t = 0; t < warm; t++) await session.step(tt);
    const hWarm = heap();
    const marks: string[] = [];
    for (let t = warm; t < turns; t++) {
      await session.step(tt);
      if ((t + 1) % 500 === 0 && t + 1 < turns) marks.push(`turn ${t + 1}: ${mib(heap())}`);
    }
    const hEnd = heap();
    console.log(`\none session of ${turns} turns (${((performance.now() - t0) / 1000).toFixed(0)} s)`);
    console.log(
      `  heap after warm-up (turn ${warm}): ${mib(hWarm)}; ${marks.join('; ')}${marks.length ? '; ' : ''}at the end: ${mib(hEnd)}`,
    );
    console.log(
      `  growth: ${mib(hEnd - hWarm)} over ${turns - warm} turns (${kb((hEnd - hWarm) / (turns - warm))} per turn)`,
    );
  } finally {
    await tt.close();
  }
}

export async function main(argv: string[]): Promise<void> {
  if ((globalThis as { gc?: unknown }).gc === undefined) {
    const self = fileURLToPath(import.meta.url);
    const run = fileURLToPath(new URL('./run.ts', import.meta.url));
    const r = spawnSync(process.execPath, ['--expose-gc', '--import', 'tsx', run, 'memory', ...argv], {
      stdio: 'inherit',
    });
    if (r.status !== 0) throw new Error(`bench memory: ${self} exited with ${r.status}`);
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), 'tt-bench-memory-'));
  try {
    console.log(
      'memory bench: JS heap after forced GC (process.memoryUsage().heapUsed); machine load makes timings, not sizes, noisy',
    );
    await sessionsBench(argv, dir);
    await longSessionBench(argv, dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
