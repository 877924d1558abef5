/**
 * `npm run bench -- memory [--sessions n] [--turns n] [--waves n] [--evict-waves n] [--gateway-sessions n]
 * [--long-turns n] [--no-snapshot]`:
 * per-session memory through `createTerminator` (reduceToolResult + reduceRequest, default
 * mode, SQLite vault on a temp file), measured as JS heap after forced GC. Re-runs itself under
 * `--expose-gc` when started without it.
 *
 * 1. `--sessions` (200) concurrent sessions of `--turns` (30) turns each (every turn: one tool
 *    result through the tool stream, then the request as the host would send it, rebuilt from
 *    JSON like every HTTP request). Heap with all of them live (their lanes subscribed) minus the
 *    heap of the warmed Terminator before: bytes per live session, and per character of its
 *    history against the estimate `maxSessionBytes` sizes sessions by (SESSION_BYTES_PER_CHAR).
 * 2. The host ends them (`endSession`), then `--waves` (12) more waves of as many new sessions are
 *    run and ended. Heap after each: bytes per ended session, and the growth slope over the waves
 *    (0 when nothing of an ended session stays). Unless `--no-snapshot`, V8 heap snapshots one
 *    wave before the last and after the last, the constructors whose count or self size grew
 *    between them, and what holds the objects new in the later one (both heaps are small: no
 *    session is live). The bounded shared caches fill over the first waves: 200 sessions of 30
 *    turns fill the 65,536 content measures in about four waves, the piece records (1,000,000
 *    pieces) and the vault's 65,536 verified digests (one per stored output) in about eleven.
 *    Every heap reading waits for the deferred telemetry first (`Terminator.settled()`): its
 *    backlog is bounded, and not session memory.
 * 3. `--evict-waves` (3) waves of sessions nobody ends: the runtime's lane LRU (maxSessions set to
 *    one wave) evicts them, holding 1.5 waves at most. The slope once the LRU is full is the
 *    growth per evicted session.
 * 4. `--gateway-sessions` (30) sessions shaped like bench proxy-load's (40 large terminal outputs):
 *    the heap their state holds while live, per character of their last requests, against the
 *    estimate `maxSessionBytes` sizes sessions by.
 * 5. One session of `--long-turns` (1,500) turns: heap at the end vs after warm-up (turn 100).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { writeHeapSnapshot } from 'node:v8';
import { createTerminator, type Terminator } from '../src/runtime/index.js';
import { SESSION_BYTES_PER_CHAR } from '../src/ledger/request-chars.js';
import { toolOutput } from './proxy-load.js';
import type { ProviderRequest } from '../src/step.js';

function flag(argv: readonly string[], name: string, fallback: number): number {
  const i = argv.indexOf(name);
  return i >= 0 ? Number(argv[i + 1]) : fallback;
}

const gc = (): void => {
  const f = (globalThis as { gc?: () => void }).gc!;
  for (let i = 0; i < 4; i++) f();
};

/**
 * JS heap after GC, once the Terminator's deferred telemetry has caught up: records still waiting
 * hold their requests' message lists, which are the telemetry's backlog (bounded by
 * `telemetryBacklog`), not sessions.
 */
async function heap(tt: Terminator, settle = true): Promise<number> {
  if (settle) await tt.settled();
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

/** What a simulated session says and runs: its opening, and each turn's call and tool output. */
interface Shape {
  readonly prefix: string;
  opening(index: number, id: string): Record<string, unknown>[];
  turn(
    index: number,
    id: string,
    t: number,
  ): { say: string | null; name: string; args: Record<string, unknown>; output: string };
}

/** Many small file reads, now and then a large one. */
const FILE_READS: Shape = {
  prefix: 'mem',
  opening: (index) => [
    { role: 'system', content: 'You are a careful coding agent. Use the tools; keep answers short.' },
    { role: 'user', content: `Task ${index}: make the failing build pass and explain the cause.` },
  ],
  turn: (index, _id, t) => ({
    say: `Turn ${t}: reading the module.`,
    name: 'read_file',
    args: { path: `src/pkg_${index % 17}/mod_${t % 11}.ts` },
    output: output(index, t),
  }),
};

/** What bench proxy-load's clients send: a terminal output of 6–40 kB (a test run) every turn. */
const TEST_RUNS: Shape = {
  prefix: 'gw',
  opening: (_index, id) => [
    { role: 'system', content: `You are coding agent ${id}. Use the terminal.` },
    { role: 'user', content: 'Make the test suite pass.' },
  ],
  turn: (_index, id, t) => ({
    say: null,
    name: 'terminal',
    args: { command: `pytest -x ${t}` },
    output: toolOutput(id, t),
  }),
};

/** One simulated agent session: its transcript, and one step (tool result + request) per turn. */
class Session {
  readonly id: string;
  readonly #messages: Record<string, unknown>[];
  #turn = 0;
  /** Characters of the latest request's messages as JSON. */
  historyChars = 0;

  constructor(
    readonly index: number,
    readonly shape: Shape = FILE_READS,
  ) {
    this.id = `${shape.prefix}-${index}`;
    this.#messages = shape.opening(index, this.id);
  }

  async step(tt: Terminator): Promise<void> {
    const t = this.#turn++;
    const callId = `call_${this.index}_${t}`;
    const { say, name, args, output } = this.shape.turn(this.index, this.id, t);
    this.#messages.push({
      role: 'assistant',
      content: say,
      tool_calls: [{ id: callId, type: 'function', function: { name, arguments: JSON.stringify(args) } }],
    });
    const reduced = await tt.reduceToolResult({ callId, name, args, content: output }, { sessionId: this.id });
    this.#messages.push({ role: 'tool', tool_call_id: callId, content: reduced.value.content });
    const json = JSON.stringify(this.#messages);
    this.historyChars = json.length;
    const request: ProviderRequest = { model: 'gpt-4o', messages: JSON.parse(json) as unknown[] };
    await tt.reduceRequest(request, { sessionId: this.id, requestId: `${this.id}#${t}` });
  }
}

/** What a wave leaves the host: its session ids and the mean size of their histories. */
interface Wave {
  readonly ids: readonly string[];
  readonly historyChars: number;
}

/**
 * One wave of `count` concurrent sessions, `turns` steps each. The host's transcripts are dropped
 * when it returns, so a heap measured after it counts only what the Terminator keeps.
 */
async function runWave(
  tt: Terminator,
  first: number,
  count: number,
  turns: number,
  shape: Shape = FILE_READS,
): Promise<Wave> {
  const sessions = Array.from({ length: count }, (_, i) => new Session(first + i, shape));
  for (let t = 0; t < turns; t++) await Promise.all(sessions.map((s) => s.step(tt)));
  return { ids: sessions.map((s) => s.id), historyChars: sessions.reduce((n, s) => n + s.historyChars, 0) / count };
}

/** The host ends its sessions (`Terminator.endSession`): their lanes close and their state goes. */
async function endAll(tt: Terminator, wave: Wave): Promise<void> {
  await Promise.all(wave.ids.map((sessionId) => tt.endSession({ sessionId })));
}

const kb = (n: number): string => `${(n / 1024).toFixed(1)} KiB`;
const mib = (n: number): string => `${(n / 1048576).toFixed(2)} MiB`;

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[]]; edge_fields: string[]; edge_types: [string[]] } };
  nodes: number[];
  edges: number[];
  strings: string[];
}

/** A snapshot's nodes read by index: their count, a field of one, and its name as the tables show it. */
function nodesOf(snap: Snapshot): {
  count: number;
  field(n: number, at: number): number;
  at(field: string): number;
  name(n: number): string;
} {
  const { node_fields: fields, node_types } = snap.snapshot.meta;
  const width = fields.length;
  const [typeAt, nameAt] = [fields.indexOf('type'), fields.indexOf('name')];
  const field = (n: number, at: number): number => snap.nodes[n * width + at]!;
  return {
    count: snap.nodes.length / width,
    field,
    at: (f) => fields.indexOf(f),
    name(n) {
      const type = node_types[0][field(n, typeAt)]!;
      return type === 'object' || type === 'closure' || type === 'native'
        ? snap.strings[field(n, nameAt)]!
        : `(${type})`;
    },
  };
}

/** Self sizes and counts per constructor name in a heap snapshot. */
function summarize(snap: Snapshot): Map<string, { count: number; size: number }> {
  const nodes = nodesOf(snap);
  const sizeAt = nodes.at('self_size');
  const out = new Map<string, { count: number; size: number }>();
  for (let n = 0; n < nodes.count; n++) {
    const name = nodes.name(n);
    const e = out.get(name) ?? { count: 0, size: 0 };
    e.count++;
    e.size += nodes.field(n, sizeAt);
    out.set(name, e);
  }
  return out;
}

/**
 * The objects of `after` that `before` did not have (snapshot node ids are stable within a
 * process), grouped by the path that holds them (four retainers up, weak edges left out), largest
 * self size first: which cache or structure kept what the ended sessions left.
 */
function newObjectsByRetainer(before: Snapshot, after: Snapshot): { path: string; count: number; size: number }[] {
  const old = new Set<number>();
  const earlier = nodesOf(before);
  for (let n = 0, idAt = earlier.at('id'); n < earlier.count; n++) old.add(earlier.field(n, idAt));
  const nodes = nodesOf(after);
  const [idAt, edgesAt, sizeAt] = ['id', 'edge_count', 'self_size'].map(nodes.at) as [number, number, number];
  const { edge_fields: ef, edge_types } = after.snapshot.meta;
  const [edgeTypeAt, edgeNameAt, toAt] = ['type', 'name_or_index', 'to_node'].map((k) => ef.indexOf(k)) as [
    number,
    number,
    number,
  ];
  const width = after.snapshot.meta.node_fields.length;
  // The first strong retainer of each node, and the edge's name.
  const holder = new Int32Array(nodes.count).fill(-1);
  const via: string[] = new Array<string>(nodes.count);
  for (let n = 0, e = 0; n < nodes.count; n++) {
    for (let k = nodes.field(n, edgesAt); k > 0; k--, e += ef.length) {
      const type = edge_types[0][after.edges[e + edgeTypeAt]!]!;
      const to = after.edges[e + toAt]! / width;
      if (type === 'weak' || holder[to] !== -1) continue;
      holder[to] = n;
      via[to] = type === 'element' || type === 'hidden' ? '[]' : String(after.strings[after.edges[e + edgeNameAt]!]);
    }
  }
  const groups = new Map<string, { count: number; size: number }>();
  for (let n = 0; n < nodes.count; n++) {
    if (old.has(nodes.field(n, idAt))) continue;
    const path = [nodes.name(n)];
    for (let cur = n, d = 0; d < 4 && holder[cur]! >= 0; d++, cur = holder[cur]!)
      path.push(`${nodes.name(holder[cur]!)}.${via[cur]}`);
    const key = path.join(' ← ');
    const g = groups.get(key) ?? { count: 0, size: 0 };
    g.count++;
    g.size += nodes.field(n, sizeAt);
    groups.set(key, g);
  }
  return [...groups].map(([path, g]) => ({ path, ...g })).sort((x, y) => y.size - x.size);
}

function snapshotDiff(beforePath: string, afterPath: string, wave: number, sessions: number): void {
  // Each file parsed once (they are tens of MB), for both tables.
  const [before, after] = [beforePath, afterPath].map((p) => JSON.parse(readFileSync(p, 'utf8')) as Snapshot) as [
    Snapshot,
    Snapshot,
  ];
  const a = summarize(before);
  const b = summarize(after);
  const rows = [...b]
    .map(([name, e]) => ({ name, count: e.count - (a.get(name)?.count ?? 0), size: e.size - (a.get(name)?.size ?? 0) }))
    .sort((x, y) => y.size - x.size);
  const total = (m: Map<string, { count: number; size: number }>): { count: number; size: number } =>
    [...m.values()].reduce((t, e) => ({ count: t.count + e.count, size: t.size + e.size }), { count: 0, size: 0 });
  const [ta, tb] = [total(a), total(b)];
  console.log(
    `  heap snapshots after wave ${wave} ended and after ${sessions} more sessions ended: ${ta.count} → ${tb.count} objects, ${mib(ta.size)} → ${mib(tb.size)} self size (${kb(tb.size - ta.size)}: ${((tb.size - ta.size) / sessions).toFixed(0)} bytes and ${((tb.count - ta.count) / sessions).toFixed(2)} objects per ended session)`,
  );
  console.log('  the constructors that grew most, by self size:');
  for (const r of rows.slice(0, 12))
    console.log(
      `    ${r.name.slice(0, 48).padEnd(48)} ${String(r.count).padStart(8)} objects ${kb(r.size).padStart(12)}`,
    );
  console.log('  objects new in the later snapshot, by what holds them (largest first):');
  for (const g of newObjectsByRetainer(before, after).slice(0, 8))
    console.log(`    ${kb(g.size).padStart(12)} ${String(g.count).padStart(7)} × ${g.path.slice(0, 150)}`);
}

async function sessionsBench(argv: readonly string[], dir: string): Promise<void> {
  const count = flag(argv, '--sessions', 200);
  const turns = flag(argv, '--turns', 30);
  const waves = flag(argv, '--waves', 12);
  const evictWaves = flag(argv, '--evict-waves', 3);
  if (count <= 0) return;
  // maxSessions = one wave: the lane LRU (3 × maxSessions lanes; these sessions use 2 lanes
  // each) then keeps at most 1.5 waves, so sessions nobody ends are evicted from the second wave on.
  const tt = await createTerminator({ overrides: { dbPath: join(dir, 'sessions.sqlite3') }, maxSessions: count });
  const kept = Math.floor((3 * count) / 2);
  const snapshots = !argv.includes('--no-snapshot');
  try {
    await endAll(tt, await runWave(tt, 1_000_000, 2, turns)); // warm-up: counters, vault statements, JIT
    const h0 = await heap(tt);
    const t0 = performance.now();
    const first = await runWave(tt, 0, count, turns);
    const hBacklog = await heap(tt, false);
    const h1 = await heap(tt);
    console.log(`\n${count} concurrent sessions × ${turns} turns (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
    console.log(
      `  heap of the warmed Terminator: ${mib(h0)}; with ${count} live sessions: ${mib(h1)} (${mib(hBacklog)} before the deferred telemetry caught up: its backlog is bounded)`,
    );
    console.log(
      `  per live session: ${kb((h1 - h0) / count)} (its request history, as JSON: ${kb(first.historyChars)}; the host's own copy is not counted)`,
    );
    const perChar = (h1 - h0) / count / first.historyChars;
    console.log(
      `  ${perChar <= SESSION_BYTES_PER_CHAR ? 'PASS' : 'FAIL'}  per character of its history: ${perChar.toFixed(1)} bytes (maxSessionBytes estimates a session at ${SESSION_BYTES_PER_CHAR}; at most that)`,
    );
    // Ended by the host: nothing of a session may stay behind in the JS heap.
    await endAll(tt, first);
    const ended = [await heap(tt)];
    console.log(`  after the host ended them (endSession): ${mib(ended[0]!)}`);
    // Heap snapshots one wave before the last and after the last: what an ended session leaves
    // behind shows as growth between them, once the bounded shared caches have filled.
    const base = Math.max(0, waves - 1);
    let snapBase: string | undefined;
    const snapAt = (w: number): void => {
      if (snapshots && waves >= 1 && w === base) snapBase = writeHeapSnapshot(join(dir, 'base.heapsnapshot'));
    };
    snapAt(0);
    for (let w = 1; w <= waves; w++) {
      await endAll(tt, await runWave(tt, w * count, count, turns));
      ended.push(await heap(tt));
      console.log(`  after wave ${w + 1}, ended too: ${(w + 1) * count} sessions ended: ${mib(ended[w]!)}`);
      snapAt(w);
    }
    console.log(
      `  per ended session: ${((ended[ended.length - 1]! - h0) / ((waves + 1) * count)).toFixed(0)} bytes (heap after all waves ended − warmed heap, ÷ sessions)`,
    );
    if (ended.length >= 2) {
      const slope = (ended[ended.length - 1]! - ended[0]!) / (waves * count);
      console.log(`  growth per ended session, slope over waves 1–${waves + 1}: ${slope.toFixed(0)} bytes`);
    }
    if (ended.length >= 4) {
      // The shared caches (content measures, piece records, the vault's verified digests) are
      // bounded and fill over the first waves: past them, what an ended session leaves shows here.
      const last = ended.slice(-3);
      console.log(
        `  growth per ended session, slope over the last 3 waves: ${((last[2]! - last[0]!) / (2 * count)).toFixed(0)} bytes`,
      );
    }
    if (snapBase !== undefined)
      snapshotDiff(snapBase, writeHeapSnapshot(join(dir, 'last.heapsnapshot')), base + 1, (waves - base) * count);
    // Never ended: the lane LRU evicts them.
    const evicted: number[] = [];
    for (let w = 1; w <= evictWaves; w++) {
      await runWave(tt, (waves + w) * count, count, turns);
      evicted.push(await heap(tt));
      console.log(
        `  never ended, wave ${w}: ${w * count} sessions left to the lane LRU, ${Math.min(w * count, kept)} of them still in it: ${mib(evicted[w - 1]!)}`,
      );
    }
    if (evicted.length >= 3) {
      // From the second wave on the LRU is full: what grows past it outlived eviction.
      const slope = (evicted[evicted.length - 1]! - evicted[1]!) / ((evicted.length - 2) * count);
      console.log(`  per evicted session, slope over waves 2–${evictWaves}: ${slope.toFixed(0)} bytes`);
    }
  } finally {
    await tt.close();
  }
}

/**
 * Sessions shaped like the gateway's load (bench proxy-load): 40 turns, each a terminal output of
 * 6–40 kB reduced at source, then the request sent whole (rebuilt from JSON). The heap their state
 * holds while live (live − after the host ended them), per character of their last requests.
 */
async function gatewaySessionsBench(argv: readonly string[], dir: string): Promise<void> {
  const count = flag(argv, '--gateway-sessions', 30);
  if (count <= 0) return;
  const tt = await createTerminator({ overrides: { dbPath: join(dir, 'gateway.sqlite3') } });
  try {
    const wave = await runWave(tt, 0, count, 40, TEST_RUNS);
    const live = await heap(tt);
    await endAll(tt, wave);
    const perSession = (live - (await heap(tt))) / count;
    const perChar = perSession / wave.historyChars;
    console.log(`\n${count} gateway-shaped sessions (40 terminal outputs of 6–40 kB each, as bench proxy-load sends)`);
    console.log(
      `  held while live: ${kb(perSession)} per session (its last request: ${kb(wave.historyChars)} of JSON)`,
    );
    console.log(
      `  ${perChar <= SESSION_BYTES_PER_CHAR ? 'PASS' : 'FAIL'}  per character of its last request: ${perChar.toFixed(1)} bytes (maxSessionBytes estimates a session at ${SESSION_BYTES_PER_CHAR}; at most that)`,
    );
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
    const hWarm = await heap(tt);
    const marks: string[] = [];
    for (let t = warm; t < turns; t++) {
      await session.step(tt);
      if ((t + 1) % 500 === 0 && t + 1 < turns) marks.push(`turn ${t + 1}: ${mib(await heap(tt))}`);
    }
    const hEnd = await heap(tt);
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
    await gatewaySessionsBench(argv, dir);
    await longSessionBench(argv, dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
