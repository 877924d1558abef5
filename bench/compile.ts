/**
 * `npm run bench -- compile [--turns 200] [--repeat 24] [--runs 1] [--long-turns 1500] [--long-hosts rebuild,gateway] [--long-repeat 5] [--long-only] [--warmup 60] [--full-path]`: a synthetic agent
 * session through the request chain (collapseDuplicates → routeSkills → compileRequest, exact
 * o200k_base gate, one item-measures memo shared by the stages as createTerminator shares it,
 * SQLite vault on a temp file), one request per turn as a host sends them, in
 * three host modes: the host reuses its message objects; rebuilds every one of them from JSON on
 * every call (new objects and new strings: an in-process host that re-serializes); or sends the
 * body's bytes, parsed by the gateway's body memo (what every request that arrives over HTTP is).
 *
 * Each mode runs `--repeat` sessions, the modes taking turns, each after a full GC: one session's
 * ten requests around turn 20 swing by a third between runs (JIT tiers, a concurrent marking of the
 * previous session's garbage), so the windows are pooled over the sessions. With 8 sessions the
 * pooled 200 / 20 ratio still moved by a quarter between runs (reused objects 0.79 and 1.02, body
 * memo 1.29 and 1.08), more than its targets' margins; 24 is the default. With 24 it still moves by
 * ±0.2 between invocations, so `--runs N` measures the pooled sessions N times in one invocation
 * and gives each mode's ratio as the median of the runs, every run's beside it (the first run is
 * printed in full).
 *
 * Printed per mode, next to baselines measured in the same run:
 * - time per request (wall and process CPU, from the call until its result is emitted) around turn
 *   20 and turn 200 (medians of the pooled windows), their ratio (incremental cost: target ≤ 1.3)
 *   and each session's own ratio; apart, the time from the result until the next request could
 *   start (what the stages run after emitting: their vault writes, due maintenance), which a host
 *   spends waiting for the model;
 * - the time to SHA-256 that request's serialized history once (compact JSON, serialized outside
 *   the timing), and the ratio of the request time at turn 200 to it (target ≤ 3);
 * - with rebuilt objects, the time to compare the history item by item with an equal rebuilt copy
 *   of the previous request's (sameJson, outside the timing): the floor of recognising it, and the
 *   lowest ratio it allows; and, as information, the ratio with the comparison against the objects
 *   of the previous request, kept since (what recognition compares with), subtracted at the last turn;
 * - the old baseline: one whole-request serialization + tokenization (the reference's per-call work).
 * Then a session's next request on a new process, tokenizing its history against reading the
 * counts the process before stored in the vault (`--fresh-rounds`, 3).
 * Then `--long-repeat` rounds (5) of a `--long-turns` session with rebuilt objects and one through
 * the body memo (`--long-hosts`, default `rebuild,gateway`; also `reuse`, and `churn`: reused
 * objects with an unread rebuilt copy parsed beside each request, which separates what the
 * rebuilding host's garbage costs the stages from what recognising its objects does; and `idle`, the rebuilding host through one pass-through
 * stage that holds each request, blocked, as long as the rebuilding host's took: the churn floor):
 * p50 and p95 per request around turn 50 and around the last turn (target: p50 ratio ≤ 1.5), p95
 * over the whole session, and the floors; with `rebuild` and `idle` (or `churn` and `reuse`), the
 * rebuilding host's growth with the comparison and that churn floor subtracted, in wall and CPU
 * (the comparison there: each request's history compared once with the previous request's objects,
 * what recognition compares with, p50 over the same windows as the requests).
 * The hosts take turns within a round, each after a full GC (`idle` after `rebuild`: it holds each
 * request as long as that round's rebuilding host took). The first round is printed in full; with
 * more rounds, then each host's p50 ratio and the rebuilding host's floor-subtracted ratios (wall
 * and CPU, per churn floor) as the median of the rounds, each round's value beside it: one
 * session's turn-50 p50 swings by half between runs, and the ratios with it.
 * `--long-only` runs the long sessions alone (after the warm-up).
 * Then parallel tool calls (bench/parallel-session.ts): per wire format and host mode, the p50
 * per request of a session whose assistant messages carry three calls with their results in a
 * shuffled order, beside its single-call twin of the same size (`--parallel-turns`, 200;
 * `--parallel-repeat`, 3 sessions each, pooled), and their ratio (target ≤ 1.5).
 * `--parallel-only` runs that comparison alone.
 * `--full-path` switches prefix recognition off (src/model/prefix.ts) to see the cost without it.
 */
import { createHash } from 'node:crypto';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PerformanceObserver } from 'node:perf_hooks';
import { createRequire, syncBuiltinESMExports } from 'node:module';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import Database from 'better-sqlite3';
import { pipe, Subject, type OperatorFunction } from 'rxjs';
import { compileRequest } from '../operators/compile-request.js';
import { collapseDuplicates } from '../operators/collapse-duplicates.js';
import { routeSkills } from '../operators/route-skills.js';
import { BodyMemo } from '../adapters/proxy/body.js';
import { createItemMeasures } from '../src/ledger/item-measures.js';
import { Recognitions, sameJson } from '../src/model/prefix.js';
import { canonicalJson, createTiktokenCounter, type TokenCounter } from '../src/measure/index.js';
import { createTerminator } from '../src/runtime/index.js';
import { stepOperator } from '../src/operator-kit.js';
import { percentile } from '../src/replay/figures.js';
import { createStep, type ProviderRequest, type Step } from '../src/step.js';
import { createVault, type Vault } from '../src/vault/index.js';
import { callsSession, type CallsSession, type SessionFormat } from './parallel-session.js';

const TURNS = 200;

/** Content at least this long counts as hashed content (a tool output; not a key or a short message). */
const HASHED_MIN_CHARS = 1000;

/**
 * SHA-256 digests of at least {@link HASHED_MIN_CHARS} characters since `reset`, while `on`:
 * node:crypto's createHash is wrapped (and the ESM bindings synced), so every digest the stages
 * make of an output is counted, whichever module makes it. `seen` holds the digests of one session
 * (its caller clears it), and `again` counts the ones made of content already hashed in it: the
 * re-hashes one item ledger rules out, whatever new content the stages make (a large output's
 * compacted form is new content, hashed once too).
 */
const hashes = { on: false, large: 0, again: 0, seen: new Set<string>() };
{
  const crypto = createRequire(import.meta.url)('node:crypto') as typeof import('node:crypto');
  const original = crypto.createHash;
  crypto.createHash = ((algorithm: string, options?: import('node:crypto').HashOptions) => {
    const hash = original(algorithm, options);
    if (algorithm !== 'sha256') return hash;
    let size = 0;
    const update = hash.update.bind(hash) as (data: string | NodeJS.ArrayBufferView, encoding?: never) => typeof hash;
    hash.update = ((data: string | NodeJS.ArrayBufferView, encoding?: never) => {
      size += typeof data === 'string' ? data.length : data.byteLength;
      update(data, encoding);
      return hash;
    }) as typeof hash.update;
    const digest = hash.digest.bind(hash) as (encoding?: never) => string | Buffer;
    hash.digest = ((encoding?: never) => {
      const out = digest(encoding);
      if (hashes.on && size >= HASHED_MIN_CHARS) {
        hashes.large++;
        const key = typeof out === 'string' ? Buffer.from(out, encoding).toString('base64') : out.toString('base64');
        if (hashes.seen.has(key)) hashes.again++;
        else hashes.seen.add(key);
      }
      return out;
    }) as typeof hash.digest;
    return hash;
  }) as typeof crypto.createHash;
  syncBuiltinESMExports();
}

export function output(t: number, run = ''): string {
  const lines = t % 7 === 3 ? 500 : 40 + (t % 5) * 10;
  return Array.from(
    { length: lines },
    (_, i) => `src/module_${t % 13}/file_${i}.ts:${i + t}: const value_${i} = compute(${t}, ${i}); // turn ${t}${run}`,
  ).join('\n');
}

/**
 * The transcript a host keeps: the same message objects are reused request after request. `run`
 * is appended to every output line, so each bench session has outputs of its own.
 */
export function transcript(turns = TURNS, run = ''): unknown[] {
  const messages: unknown[] = [
    { role: 'system', content: 'You are a careful coding agent. Use the tools.' },
    { role: 'user', content: 'Fix the failing build and explain the cause.' },
  ];
  for (let t = 0; t < turns; t++) {
    messages.push({
      role: 'assistant',
      content: `Step ${t}: looking at module ${t % 13}.`,
      tool_calls: [
        {
          id: `call_${t}`,
          type: 'function',
          function: { name: t % 2 === 0 ? 'search_files' : 'read_file', arguments: `{"path":"src/module_${t % 13}"}` },
        },
      ],
    });
    messages.push({ role: 'tool', tool_call_id: `call_${t}`, content: output(t, run) });
  }
  return messages;
}

const median = (xs: readonly number[]): number =>
  percentile(
    [...xs].sort((a, b) => a - b),
    50,
  );

/** `--long-hosts a,b`: the long session's modes, in order (default rebuild, gateway). */
function hostList(argv: readonly string[]): LongHost[] {
  const i = argv.indexOf('--long-hosts');
  if (i < 0) return ['rebuild', 'gateway'];
  const names = (argv[i + 1] ?? '').split(',').filter((x) => x !== '');
  const bad = names.filter((x) => !(LONG_HOSTS as readonly string[]).includes(x));
  if (names.length === 0 || bad.length > 0)
    throw new Error(
      `--long-hosts takes a comma-separated list of ${LONG_HOSTS.join(', ')}; got ${argv[i + 1] ?? 'nothing'}`,
    );
  return names as LongHost[];
}

function flag(argv: readonly string[], name: string, fallback: number): number {
  const i = argv.indexOf(name);
  return i >= 0 ? Number(argv[i + 1]) : fallback;
}

interface Timing {
  /** Per request (index = turn − 1): wall ms, process CPU ms, and ms of GC pauses inside the request. */
  readonly wall: number[];
  readonly cpu: number[];
  /** Per request: from its result's emission until the next request could start (the stages' work after the result). */
  readonly after: number[];
  readonly gc: number[];
  /** Gateway only: per request, ms of the body memo's parse (part of `wall`). */
  readonly parse: number[];
  /** SHA-256 of the request's serialized history, ms (median of 5), at the turns asked for. */
  readonly sha: Map<number, number>;
  /**
   * Rebuilt objects only: comparing the request's history, item by item, with an equal rebuilt
   * copy of the previous request's (src/model/prefix.ts sameJson), ms (median of 7), at the turns
   * asked for: what recognising rebuilt objects costs at least.
   */
  readonly compare: Map<number, number>;
  /** The same comparison, process CPU ms (a loaded machine stretches wall time, not this). */
  readonly compareCpu: Map<number, number>;
  /**
   * Rebuilt objects only, per request in the two windows (turns 26–75 and the last 50; NaN
   * elsewhere): comparing its history once, item by item, with the previous request's objects
   * (what recognition compares with), after the request, wall and process CPU ms.
   */
  readonly compareSent: number[];
  readonly compareSentCpu: number[];
  /** Whole-request serialize + tokenize, ms, at the turns asked for. */
  readonly tokenize: Map<number, number>;
  /**
   * Per request: SHA-256 digests of content of at least HASHED_MIN_CHARS made from its arrival
   * until the next request's (its stages' work after the result included), per new item of that
   * size in it (each turn adds one tool output of that size).
   */
  readonly hashes: number[];
  /** Digests of content this session had already hashed (target 0). */
  readonly rehashed: number;
  readonly historyChars: Map<number, number>;
  readonly finalChars: number;
}

/**
 * How requests reach the chain: the host reuses its message objects; rebuilds every one of them
 * from JSON (new objects and new strings) outside the timing; or sends the body's bytes through
 * the gateway's body memo (adapters/proxy/body.ts), whose parse is timed with the request.
 */
type Host = 'reuse' | 'rebuild' | 'gateway';
const HOSTS: readonly Host[] = ['reuse', 'rebuild', 'gateway'];
/**
 * The long session's modes: the three hosts, and `churn`, a host that reuses its objects but parses
 * a rebuilt copy of the history beside each request (outside the timing) that nothing reads: the
 * rebuilding host's garbage and memory traffic without recognition.
 */
type LongHost = Host | 'churn' | 'idle';
const LONG_HOSTS: readonly LongHost[] = [...HOSTS, 'churn', 'idle'];
const HOST_LABEL: Record<LongHost, string> = {
  idle: 'host rebuilds every message object; one pass-through stage holds each request as long as the rebuilding host took (the churn floor)',
  churn: 'host reuses its transcript objects and parses an unread rebuilt copy beside each request',
  reuse: 'host reuses its transcript objects',
  rebuild: 'host rebuilds every message object (JSON, new objects and strings)',
  gateway: "requests arrive as bytes through the gateway's body memo (its parse timed)",
};

/**
 * The request chain (collapseDuplicates → routeSkills → compileRequest) on `vault`: the two request
 * stages share what they recognise (src/model/prefix.ts) and one item-measures memo (and so one
 * digest ledger), as createTerminator wires them. `prefixRecognition` false: the full path.
 */
export function requestChain(
  vault: Vault,
  counter: TokenCounter,
  prefixRecognition = true,
): OperatorFunction<Step<ProviderRequest>, Step<ProviderRequest>> {
  const recognitions = new Recognitions();
  const measures = createItemMeasures({ counter, recognitions });
  return pipe(
    collapseDuplicates({ vault, counter, measures, prefixRecognition, recognitions }),
    routeSkills({ counter }),
    compileRequest({ vault, counter, measures, prefixRecognition, recognitions }),
  );
}

/** One session of `turns` requests through the chain, arriving as `host` sends them. Baselines are measured at `probes`. */
let runs = 0;

async function runSession(
  host: LongHost,
  turns: number,
  probes: readonly number[],
  prefixRecognition = true,
  /** `idle` only: per turn, ms the pass-through stage holds that request (blocked, not working). */
  hold: readonly number[] = [],
): Promise<Timing> {
  const idle = host === 'idle';
  const fresh = host === 'rebuild' || idle;
  const gateway = host === 'gateway';
  const churn = host === 'churn';
  const dir = mkdtempSync(join(tmpdir(), 'tt-bench-compile-'));
  const vault = await createVault({ path: join(dir, 'vault.sqlite3') });
  const counter = createTiktokenCounter('o200k_base');
  const input = new Subject<Step<ProviderRequest>>();
  // Only the latest output is kept: a host does not hold every request it ever sent (holding all
  // of them made the heap, and so every major GC, grow with the session).
  let emitted = 0;
  let last: Step<ProviderRequest> | undefined;
  // A request ends when its result is emitted (the host has it then); what the stages run after
  // that, before the next request, is timed apart (`after`).
  let c0 = process.cpuUsage();
  let emittedAt = 0;
  let cpuAt = c0;
  // `idle`: the same host and session through one stage that passes every request on (the
  // operator kit's own path, nothing read), blocked for `hold` ms (Atomics.wait: no CPU of its own,
  // while the collector's threads go on): what the host's garbage and heap cost a request that
  // does nothing of ours for as long as ours took.
  let turn = 0;
  const sleeper = new Int32Array(new SharedArrayBuffer(4));
  const stages = idle
    ? input.pipe(
        stepOperator<ProviderRequest>('pass-through', () => () => {
          if ((hold[turn - 1] ?? 0) > 0) Atomics.wait(sleeper, 0, 0, hold[turn - 1]);
          return undefined;
        }),
      )
    : input.pipe(requestChain(vault, counter, prefixRecognition));
  const sub = stages.subscribe((s) => {
    emittedAt = performance.now();
    cpuAt = process.cpuUsage(c0);
    emitted++;
    last = s;
  });
  const messages = transcript(turns, ` (run ${++runs})`);
  // The JSON text of each message once, so a rebuilt request is one JSON.parse of its history.
  const texts = fresh || gateway || churn ? messages.map((m) => JSON.stringify(m)) : [];
  // `gateway`: each request arrives as its body's bytes and the gateway's body memo parses it
  // (adapters/proxy/body.ts: the history the previous body shared is that body's objects), timed.
  const bodies = gateway ? new BodyMemo() : undefined;
  const wall: number[] = [];
  const cpu: number[] = [];
  const after: number[] = [];
  const parse: number[] = [];
  const windows: [number, number][] = [];
  const pauses: { start: number; ms: number }[] = [];
  const observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) pauses.push({ start: e.startTime, ms: e.duration });
  });
  observer.observe({ entryTypes: ['gc'] });
  const sha = new Map<number, number>();
  const compare = new Map<number, number>();
  const compareCpu = new Map<number, number>();
  const tokenize = new Map<number, number>();
  const historyChars = new Map<number, number>();
  const hashed: number[] = [];
  // The previous request's list as the host handed it over, which recognition compares a rebuilt
  // item with (the stages keep it until the next request anyway).
  let sent: readonly unknown[] = [];
  const [compareSent, compareSentCpu]: [number[], number[]] = [[], []];
  hashes.seen.clear();
  hashes.again = 0;
  try {
    for (let t = 1; t <= turns; t++) {
      turn = t;
      const n = 2 + 2 * t;
      // Built outside the timing: the body's bytes (gateway), or the request as the host hands it over.
      const body = gateway ? Buffer.from(`{"model":"gpt-4o","messages":[${texts.slice(0, n).join(',')}]}`) : undefined;
      let request: ProviderRequest | undefined = gateway
        ? undefined
        : {
            model: 'gpt-4o',
            messages: fresh ? (JSON.parse(`[${texts.slice(0, n).join(',')}]`) as unknown[]) : messages.slice(0, n),
          };
      // Held until the request's result, as a host holds the request it built.
      let unread: unknown = churn ? JSON.parse(`[${texts.slice(0, n).join(',')}]`) : undefined;
      const before = emitted;
      const done = new Promise<void>((resolve) => {
        const poll = (): void => (emitted > before ? resolve() : void setImmediate(poll));
        poll();
      });
      c0 = process.cpuUsage();
      const w0 = performance.now();
      if (request === undefined) {
        const parsed = bodies!.parse(body!, 'messages', 'bench', () => 'gateway');
        parse.push(performance.now() - w0);
        if (parsed === undefined || (t > 1 && parsed.reused !== n - 2))
          throw new Error('body memo did not reuse the history');
        request = parsed.value as unknown as ProviderRequest;
      }
      if (t > 1) hashed.push(hashes.large);
      [hashes.on, hashes.large] = [true, 0];
      input.next(
        createStep(request, { sessionId: gateway ? 'gateway' : fresh ? 'fresh' : 'shared', requestId: `r${t}` }),
      );
      await done;
      if (unread !== undefined) unread = undefined;
      after.push(performance.now() - emittedAt);
      wall.push(emittedAt - w0);
      windows.push([w0, emittedAt]);
      cpu.push((cpuAt.user + cpuAt.system) / 1000);
      if (fresh) {
        const list = request.messages as unknown[];
        const [wallMs, cpuMs] = (t > 25 && t <= 75) || t > turns - 50 ? compareOnce(list, sent) : [NaN, NaN];
        compareSent.push(wallMs);
        compareSentCpu.push(cpuMs);
        sent = list;
      }
      if (probes.includes(t)) {
        hashes.on = false; // the baselines' own digests are not the stages'
        const serialized = canonicalJson(request, { compact: true });
        historyChars.set(t, serialized.length);
        const runs: number[] = [];
        for (let k = 0; k < 5; k++) {
          const h0 = performance.now();
          createHash('sha256').update(serialized, 'utf8').digest('base64');
          runs.push(performance.now() - h0);
        }
        sha.set(t, median(runs));
        if (fresh) {
          const list = request.messages as unknown[];
          const previous = JSON.parse(`[${texts.slice(0, n - 2).join(',')}]`) as unknown[];
          // Seven, not three: right after parsing a 16 MB history, a collection of that garbage
          // landed in two of three runs once and measured this floor at 15 ms instead of 5.
          const [times, cpus]: [number[], number[]] = [[], []];
          for (let k = 0; k < 7; k++) {
            const [c0, u0] = [performance.now(), process.cpuUsage()];
            for (let i = 0; i < previous.length; i++) if (!sameJson(list[i], previous[i])) throw new Error('differs');
            times.push(performance.now() - c0);
            const u = process.cpuUsage(u0);
            cpus.push((u.user + u.system) / 1000);
          }
          compare.set(t, median(times));
          compareCpu.set(t, median(cpus));
        }
        const b0 = performance.now();
        counter.count(canonicalJson(request, { compact: true }));
        tokenize.set(t, performance.now() - b0);
        hashes.on = true;
      }
    }
    await new Promise((r) => setImmediate(r)); // the last GC entries
    const gc = windows.map(([a, b]) => pauses.reduce((n, p) => n + (p.start >= a && p.start < b ? p.ms : 0), 0));
    return {
      wall,
      cpu,
      after,
      gc,
      parse,
      sha,
      compare,
      compareCpu,
      compareSent,
      compareSentCpu,
      tokenize,
      historyChars,
      finalChars: canonicalJson(last!.value).length,
      hashes: hashed,
      rehashed: hashes.again,
    };
  } finally {
    hashes.on = false;
    observer.disconnect();
    sub.unsubscribe();
    counter.dispose?.();
    await vault.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** One pass comparing `list` with `sent` item by item (sameJson), wall and process CPU ms. */
function compareOnce(list: readonly unknown[], sent: readonly unknown[]): [number, number] {
  const [w0, u0] = [performance.now(), process.cpuUsage()];
  for (let i = 0; i < sent.length; i++) if (!sameJson(list[i], sent[i])) throw new Error('differs');
  const u = process.cpuUsage(u0);
  return [performance.now() - w0, (u.user + u.system) / 1000];
}

/** Median of the ten requests ending at `turn` (one request's time is dominated by GC or vault checkpoints now and then). */
const around = (xs: readonly number[], turn: number): number => median(xs.slice(Math.max(0, turn - 10), turn));

/**
 * What the gateway does with a body before the pipeline, per request of one session: parse it
 * whole, digest it (the request id) and compare its items with the previous request's (the item
 * memo's structural match),
 * against the body memo (adapters/proxy/body.ts), which compares bytes with the previous body and
 * parses only what follows the shared items. Median of the requests ending at each probe turn.
 */
function bodyParsing(turns: number, probes: readonly number[]): void {
  const messages = transcript(turns, ' (bodies)');
  const texts = messages.map((m) => JSON.stringify(m));
  const memo = new BodyMemo();
  const whole: number[] = [];
  const reusing: number[] = [];
  let previous: unknown[] = [];
  for (let t = 1; t <= turns; t++) {
    const buf = Buffer.from(`{"model":"gpt-4o","messages":[${texts.slice(0, 2 + 2 * t).join(',')}],"stream":false}`);
    const a0 = performance.now();
    const parsed = JSON.parse(buf.toString('utf8')) as { messages: unknown[] };
    for (let i = 0; i < previous.length; i++) sameJson(parsed.messages[i], previous[i]);
    createHash('sha256').update('session').update(buf).digest('hex'); // the request id
    whole.push(performance.now() - a0);
    previous = parsed.messages;
    const b0 = performance.now();
    const out = memo.parse(buf, 'messages', 'bench', () => 'session');
    reusing.push(performance.now() - b0);
    if (out === undefined || (t > 1 && out.reused !== 2 * t)) throw new Error('body memo did not reuse the history');
  }
  console.log(`
gateway body parsing, one session (median of the 10 requests ending at each turn)`);
  for (const t of probes) {
    const a = around(whole, t);
    const b = around(reusing, t);
    console.log(
      `  turn ${String(t).padStart(4)}: parse whole + digest + item compare ${a.toFixed(2)} ms, body memo ${b.toFixed(3)} ms (ratio ${(b / a).toFixed(3)})`,
    );
  }
}

/** A full GC between sessions, so one session does not pay for collecting the previous one's garbage. */
function fullGc(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

/** Median of the pooled windows of `runs`: the ten requests ending at `turn` of every session. */
const pooled = (runs: readonly number[][], turn: number): number =>
  median(runs.flatMap((xs) => xs.slice(Math.max(0, turn - 10), turn)));

/**
 * A session's next request on a process that never saw it (a restarted or second gateway on the
 * same vault; the process before served the previous request), through the runtime: tokenizing
 * its whole history, against reading the counts the process before stored
 * (src/ledger/stored-counts.ts). Each Terminator has its own measurement memo, as a new process
 * would. Time of the call and of its telemetry after it (settled), median of `rounds`, each round
 * with its own outputs.
 */
async function freshProcess(turns: number, rounds: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'tt-bench-fresh-'));
  const call: [number[], number[]] = [[], []];
  const after: [number[], number[]] = [[], []];
  try {
    for (let k = 0; k < rounds; k++) {
      const messages = transcript(turns, ` (fresh ${k})`);
      const text = JSON.stringify(messages);
      const stored = join(dir, `stored-${k}.sqlite3`);
      // The process before: the session's previous request (one exchange shorter).
      const first = await createTerminator({ env: {}, overrides: { dbPath: stored }, metrics: false });
      const previous = JSON.parse(JSON.stringify(messages.slice(0, -2))) as unknown[];
      await first.reduceRequest({ model: 'gpt-4o', messages: previous }, { sessionId: 'session' });
      await first.close();
      // The same store without the counts.
      const bare = join(dir, `bare-${k}.sqlite3`);
      copyFileSync(stored, bare);
      const raw = new Database(bare);
      raw.prepare('delete from token_counts').run();
      raw.close();
      for (const [i, path] of [bare, stored].entries()) {
        const tt = await createTerminator({ env: {}, overrides: { dbPath: path }, metrics: false });
        const request = { model: 'gpt-4o', messages: JSON.parse(text) as unknown[] };
        const t0 = performance.now();
        await tt.reduceRequest(request, { sessionId: 'session' });
        const t1 = performance.now();
        await tt.settled();
        call[i]!.push(t1 - t0);
        after[i]!.push(performance.now() - t1);
        await tt.close();
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(
    `\na session's next request on a new process (the previous one was served by another), turn ${turns} (runtime; median of ${rounds})`,
  );
  const row = (label: string, i: 0 | 1): void =>
    console.log(`  ${label}: ${median(call[i]).toFixed(1)} ms, telemetry after it ${median(after[i]).toFixed(1)} ms`);
  row('tokenizing the whole history            ', 0);
  row('with the counts the other process stored', 1);
  console.log(`  ratio (call): ${(median(call[1]) / median(call[0])).toFixed(3)}`);
}

export async function main(argv: string[]): Promise<void> {
  const turns = flag(argv, '--turns', TURNS);
  const repeat = flag(argv, '--repeat', 24);
  const longTurns = flag(argv, '--long-turns', 1500);
  const longHosts = hostList(argv);
  const longRepeat = flag(argv, '--long-repeat', 5);
  if (!Number.isInteger(repeat) || repeat < 1) throw new Error('--repeat must be an integer ≥ 1');
  if (!Number.isInteger(longRepeat) || longRepeat < 1) throw new Error('--long-repeat must be an integer ≥ 1');
  const recognition = !argv.includes('--full-path');
  const early = Math.min(20, turns);
  const gc = fullGc();
  if (argv.includes('--parallel-only')) return parallelCalls(argv, gc);
  console.log(
    `compile bench: ${turns} turns, ${repeat} session(s) per host mode${argv.includes('--full-path') ? ', prefix recognition OFF (full path)' : ''}`,
  );
  // A discarded session first: without it the first measured mode pays the JIT's warm-up in its
  // early turns, flattering its turn-200 / turn-20 ratio.
  const warmup = flag(argv, '--warmup', 60);
  if (warmup > 0) for (const host of HOSTS) await runSession(host, warmup, [], recognition);
  if (argv.includes('--long-only')) return longSessions(longHosts, longTurns, recognition, gc, longRepeat);
  const runs = flag(argv, '--runs', 1);
  if (!Number.isInteger(runs) || runs < 1) throw new Error('--runs must be an integer ≥ 1');
  // Per host, each run's turn-200 / turn-20 ratio of the pooled medians, wall and CPU.
  const ratios = new Map<Host, Record<Series, number>[]>(HOSTS.map((h) => [h, []]));
  for (let run = 0; run < runs; run++) {
    const results = new Map<Host, Timing[]>(HOSTS.map((h) => [h, []]));
    for (let k = 0; k < repeat; k++)
      for (const host of HOSTS) {
        gc();
        results.get(host)!.push(await runSession(host, turns, [early, turns], recognition));
      }
    for (const host of HOSTS) {
      const rs = results.get(host)!;
      const at = (xs: number[][]): number => pooled(xs, turns) / pooled(xs, early);
      ratios.get(host)!.push({ wall: at(rs.map((x) => x.wall)), cpu: at(rs.map((x) => x.cpu)) });
    }
    if (run === 0) printRuns(results, turns, early);
  }
  if (runs > 1) {
    console.log(
      `\nratio turn ${turns} / turn ${early}, median of ${runs} runs of ${repeat} sessions per host mode (target ≤ 1.3)`,
    );
    for (const host of HOSTS) {
      const rs = ratios.get(host)!;
      const show = (x: Series): string =>
        `${median(rs.map((r) => r[x])).toFixed(2)} (runs: ${rs.map((r) => r[x].toFixed(2)).join(', ')}) ${x === 'wall' ? 'wall' : 'CPU'}`;
      console.log(`  ${host.padEnd(7)}: ${show('wall')}, ${show('cpu')}`);
    }
  }
  await parallelCalls(argv, gc);
  await freshProcess(turns, flag(argv, '--fresh-rounds', 3));
  bodyParsing(Math.max(turns, longTurns), [early, turns, ...(longTurns > turns ? [longTurns] : [])]);
  if (longTurns > 50) await longSessions(longHosts, longTurns, recognition, gc, longRepeat);
}

/** The first run's sessions per host mode, in full. */
function printRuns(results: ReadonlyMap<Host, Timing[]>, turns: number, early: number): void {
  for (const host of HOSTS) {
    const rs = results.get(host)!;
    const r = rs[0]!;
    const label = HOST_LABEL[host];
    const walls = rs.map((x) => x.wall);
    const cpus = rs.map((x) => x.cpu);
    const w20 = pooled(walls, early);
    const w200 = pooled(walls, turns);
    const c20 = pooled(cpus, early);
    const c200 = pooled(cpus, turns);
    const shaAt = (turn: number): number => median(rs.map((x) => x.sha.get(turn)!));
    const sha = shaAt(turns);
    const each = rs.map((x) => (around(x.wall, turns) / around(x.wall, early)).toFixed(2)).join(', ');
    console.log(`\n${label}`);
    console.log(
      `  per request, median of turns ${early - 9}–${early} (${rs.length} sessions pooled):   ${w20.toFixed(2)} ms wall, ${c20.toFixed(2)} ms CPU`,
    );
    console.log(
      `  per request, median of turns ${turns - 9}–${turns} (${rs.length} sessions pooled): ${w200.toFixed(2)} ms wall, ${c200.toFixed(2)} ms CPU`,
    );
    console.log(
      `  ratio turn ${turns} / turn ${early}: ${(w200 / w20).toFixed(2)} wall, ${(c200 / c20).toFixed(2)} CPU (target ≤ 1.3); each session's wall ratio: ${each}`,
    );
    const afters = rs.map((x) => x.after);
    console.log(
      `  after the result, until the next request could start (the stages' own writes, due vault maintenance), median: ${pooled(afters, early).toFixed(2)} ms at turn ${early}, ${pooled(afters, turns).toFixed(2)} ms at turn ${turns}`,
    );
    console.log(
      `  SHA-256 of the serialized history once: ${shaAt(early).toFixed(2)} ms at turn ${early} (${r.historyChars.get(early)} chars), ${sha.toFixed(2)} ms at turn ${turns} (${r.historyChars.get(turns)} chars)`,
    );
    console.log(
      `  request at turn ${turns} / that SHA-256: ${(w200 / sha).toFixed(2)} wall, ${(c200 / sha).toFixed(2)} CPU (target ≤ 3)`,
    );
    if (host === 'rebuild') {
      const compareAt = (turn: number): number => median(rs.map((x) => x.compare.get(turn)!));
      console.log(
        `  comparing the history with the previous request's rebuilt copy (the floor of recognising it): ${compareAt(early).toFixed(2)} ms at turn ${early}, ${compareAt(turns).toFixed(2)} ms at turn ${turns}`,
      );
      // The request at turn 200 does the turn-20 request's work on its new content, and compares.
      console.log(
        `  so the ratio cannot go below 1 + that comparison / the turn-${early} request: ${(1 + compareAt(turns) / w20).toFixed(2)}`,
      );
      // The comparison as the requests make it: the previous request's objects, kept a request long
      // (not a copy parsed just before): one pass per request over the same pooled window (compareOnce).
      const compared = pooled(
        rs.map((x) => x.compareSent),
        turns,
      );
      console.log(
        `  information, not the target: ratio turn ${turns} / turn ${early} with the comparison against the previous request's objects (one pass per request, turns ${turns - 9}–${turns} pooled) subtracted at turn ${turns}: (${w200.toFixed(2)} − ${compared.toFixed(2)}) / ${w20.toFixed(2)} = ${((w200 - compared) / w20).toFixed(2)} wall`,
      );
    }
    console.log(
      `  old baseline, one whole-request serialize + tokenize: ${r.tokenize.get(early)!.toFixed(2)} ms at turn ${early}, ${r.tokenize.get(turns)!.toFixed(2)} ms at turn ${turns}`,
    );
    console.log(`  final request at turn ${turns}: ${r.finalChars} chars (raw ${r.historyChars.get(turns)})`);
    const perItem = rs.flatMap((x) => x.hashes.slice(1));
    console.log(
      `  SHA-256 digests of ≥ ${HASHED_MIN_CHARS} chars per new item of that size per request (target 1): mean ${(perItem.reduce((a, b) => a + b, 0) / perItem.length).toFixed(2)}, max ${Math.max(...perItem)}; of content the session had already hashed: ${rs.reduce((n, x) => n + x.rehashed, 0)} (target 0; above 1 are the compacted forms the stages make of large outputs, new content hashed once)`,
    );
  }
}

/**
 * The `--long-turns` sessions: `repeat` rounds of one session per host of `hosts`, the hosts taking
 * turns within a round, each after a full GC. With `idle` and `rebuild` both run (or `churn` and
 * `reuse`), the rebuilding host's growth is also given with the comparison and a churn floor
 * subtracted. The first round is printed in detail; with more than one round, each figure is then
 * given again as the median of the rounds' own, with every round's value beside it.
 */
async function longSessions(
  hosts: readonly LongHost[],
  longTurns: number,
  recognition: boolean,
  gc: () => void,
  repeat: number,
): Promise<void> {
  // The idle host holds each request as long as the rebuilding host's took: it runs after it.
  const order = hosts.includes('rebuild')
    ? [...hosts.filter((h) => h !== 'idle'), ...hosts.filter((h) => h === 'idle')]
    : hosts;
  if (repeat > 1)
    console.log(
      `\n${longTurns}-request sessions, ${repeat} rounds (${order.join(', ')} taking turns in each); round 1 in detail, then the medians of the rounds`,
    );
  const rounds: RoundFigures[] = [];
  for (let k = 0; k < repeat; k++) {
    const done = new Map<LongHost, Timing>();
    for (const host of order) {
      gc();
      // This round's rebuilding host: the idle host replays its hold times.
      const hold = host === 'idle' ? (done.get('rebuild')?.wall ?? []) : [];
      const r = await runSession(host, longTurns, [50, longTurns], recognition, hold);
      done.set(host, r);
      if (k === 0) longSession(HOST_LABEL[host], r, longTurns);
    }
    const figures = roundFigures(done, longTurns);
    if (k === 0) printFloors(figures, longTurns);
    rounds.push(figures);
  }
  if (repeat > 1) printMedians(order, rounds, longTurns);
}

type Series = 'wall' | 'cpu';
const SERIES: readonly Series[] = ['wall', 'cpu'];

/** The 50 requests around `turn` (turns `turn` − 24 to `turn` + 25; 50: turns 26–75), sorted. */
const windowAt = (xs: readonly number[], turn: number): number[] =>
  [...xs.slice(Math.max(0, turn - 25), turn + 25)].sort((a, b) => a - b);
/** The p50 of {@link windowAt}. */
const p50At = (xs: readonly number[], turn: number): number => percentile(windowAt(xs, turn), 50);

/** The rebuilding host's p50 per request, the comparison's and a churn floor's, in one series at turn 50 and at the last turn. */
interface FloorFigures {
  readonly r50: number;
  readonly rEnd: number;
  readonly c50: number;
  readonly cEnd: number;
  readonly f50: number;
  readonly fEnd: number;
}
/** (p50 at the last turn − comparison − churn floor) / p50 at 50. */
const net = (f: FloorFigures): number => (f.rEnd - f.cEnd - f.fEnd) / f.r50;
/** The same with both floors subtracted at turn 50 too. */
const netBoth = (f: FloorFigures): number => (f.rEnd - f.cEnd - f.fEnd) / (f.r50 - f.c50 - f.f50);

/** One round of long sessions, in figures: per host its p50 ratio, per churn floor the rebuilding host's growth with it. */
interface RoundFigures {
  readonly ratios: Map<LongHost, Record<Series, number>>;
  /** Per churn floor measured (its description), wall and CPU. */
  readonly floors: Map<string, Record<Series, FloorFigures>>;
}

const IDLE_FLOOR =
  "the idle host's p50 (one pass-through stage held for the rebuilding host's span, turn by turn; wall: beyond that span)";
const CHURN_FLOOR =
  "the churn host's p50 − the reusing host's (our stages on reused objects, with and without the garbage)";

function roundFigures(done: ReadonlyMap<LongHost, Timing>, longTurns: number): RoundFigures {
  const [early, late] = [50, longTurns - 25];
  const ratios = new Map<LongHost, Record<Series, number>>();
  for (const [host, r] of done)
    ratios.set(host, {
      wall: p50At(r.wall, late) / p50At(r.wall, early),
      cpu: p50At(r.cpu, late) / p50At(r.cpu, early),
    });
  const floors = new Map<string, Record<Series, FloorFigures>>();
  const rebuilt = done.get('rebuild');
  if (rebuilt === undefined) return { ratios, floors };
  const withFloor = (what: string, floor: (x: Series) => [number, number]): void => {
    const at = (x: Series): FloorFigures => {
      // The comparison floor as the requests are measured: one pass per request, against the
      // previous request's objects, p50 over the same windows.
      const compared = x === 'wall' ? rebuilt.compareSent : rebuilt.compareSentCpu;
      const [f50, fEnd] = floor(x);
      return {
        r50: p50At(rebuilt[x], early),
        rEnd: p50At(rebuilt[x], late),
        c50: p50At(compared, early),
        cEnd: p50At(compared, late),
        f50,
        fEnd,
      };
    };
    floors.set(what, { wall: at('wall'), cpu: at('cpu') });
  };
  // What the host's garbage and heap cost a request that does nothing of ours for as long as the
  // rebuilding host's request took, turn by turn: in wall time, how much later than that span it
  // ends (collections on the main thread, the collector's threads taking the cores); in CPU, what
  // the process spends during it (the collector's threads: the pass-through itself blocks).
  const idle = done.get('idle');
  if (idle !== undefined)
    withFloor(IDLE_FLOOR, (x) => {
      const xs = x === 'cpu' ? idle.cpu : idle.wall.map((w, i) => w - (rebuilt.wall[i] ?? 0));
      return [p50At(xs, early), p50At(xs, late)];
    });
  // What they cost our stages' own work: the same stages on reused objects, with and without the
  // rebuilt copy parsed beside each request (two sessions: noisier).
  const [churn, reuse] = [done.get('churn'), done.get('reuse')];
  if (churn !== undefined && reuse !== undefined)
    withFloor(
      CHURN_FLOOR,
      // Never below 0: two sessions' noise is no saving to subtract.
      (x) => [
        Math.max(0, p50At(churn[x], early) - p50At(reuse[x], early)),
        Math.max(0, p50At(churn[x], late) - p50At(reuse[x], late)),
      ],
    );
  return { ratios, floors };
}

/** One round's rebuilding host with the comparison and each churn floor subtracted, every term shown. */
function printFloors(figures: RoundFigures, longTurns: number): void {
  if (!figures.ratios.has('rebuild')) return;
  console.log(`\n${longTurns}-request session on the rebuilding host, the comparison and a churn floor subtracted`);
  for (const [what, bySeries] of figures.floors)
    for (const x of SERIES) {
      const f = bySeries[x];
      console.log(
        `  ${x === 'wall' ? `churn floor, ${what}:\n    wall` : '    CPU '}: floor ${f.f50.toFixed(3)} ms at turn 50, ${f.fEnd.toFixed(3)} ms at turn ${longTurns}; (p50 at ${longTurns} − comparison − churn floor) / p50 at 50: (${f.rEnd.toFixed(2)} − ${f.cEnd.toFixed(2)} − ${f.fEnd.toFixed(2)}) / ${f.r50.toFixed(2)} = ${net(f).toFixed(2)} (target ≤ 1.5); both floors subtracted at both turns too: (${f.rEnd.toFixed(2)} − ${(f.cEnd + f.fEnd).toFixed(2)}) / (${f.r50.toFixed(2)} − ${(f.c50 + f.f50).toFixed(2)}) = ${netBoth(f).toFixed(2)}`,
      );
    }
}

/** Each figure of the rounds as their median, with every round's own value (in round order) beside it. */
function printMedians(hosts: readonly LongHost[], rounds: readonly RoundFigures[], longTurns: number): void {
  const show = (xs: readonly number[]): string =>
    `${median(xs).toFixed(2)} (rounds: ${xs.map((x) => x.toFixed(2)).join(', ')})`;
  console.log(`\n${longTurns}-request sessions, medians of ${rounds.length} rounds (one session per host each)`);
  for (const host of hosts) {
    const of = (x: Series): number[] => rounds.map((f) => f.ratios.get(host)![x]);
    console.log(
      `  ${host.padEnd(7)} p50 ratio last / turn 50: ${show(of('wall'))} wall, ${show(of('cpu'))} CPU (target ≤ 1.5)`,
    );
  }
  for (const what of rounds[0]!.floors.keys()) {
    console.log(`  rebuilding host, the comparison and a churn floor subtracted; churn floor, ${what}:`);
    for (const x of SERIES) {
      const fs = rounds.map((f) => f.floors.get(what)![x]);
      console.log(
        `    ${x === 'wall' ? 'wall' : 'CPU '}: (p50 at ${longTurns} − comparison − churn floor) / p50 at 50: ${show(fs.map(net))} (target ≤ 1.5); both floors subtracted at both turns too: ${show(fs.map(netBoth))}; p50 ${show(fs.map((f) => f.r50))} ms at turn 50, ${show(fs.map((f) => f.rEnd))} ms at turn ${longTurns}`,
      );
    }
  }
}

/** The p50 / p95 figures of one long session `r` (`label`: how its requests arrive), and the floors where measured. */
function longSession(label: string, r: Timing, longTurns: number): void {
  const at50 = windowAt(r.wall, 50);
  const atEnd = windowAt(r.wall, longTurns - 25);
  const c50 = windowAt(r.cpu, 50);
  const cEnd = windowAt(r.cpu, longTurns - 25);
  const all = [...r.wall].sort((a, b) => a - b);
  const noGc = r.wall.map((w, i) => w - r.gc[i]!);
  const g50 = windowAt(noGc, 50);
  const gEnd = windowAt(noGc, longTurns - 25);
  console.log(`\n${longTurns}-request session, ${label} (windows of 50 requests)`);
  console.log(
    `  turns 26–75:             p50 ${percentile(at50, 50).toFixed(2)} ms, p95 ${percentile(at50, 95).toFixed(2)} ms wall; p50 ${percentile(c50, 50).toFixed(2)} ms CPU`,
  );
  console.log(
    `  turns ${longTurns - 49}–${longTurns}:       p50 ${percentile(atEnd, 50).toFixed(2)} ms, p95 ${percentile(atEnd, 95).toFixed(2)} ms wall; p50 ${percentile(cEnd, 50).toFixed(2)} ms CPU`,
  );
  console.log(
    `  p50 ratio last / turn 50: ${(percentile(atEnd, 50) / percentile(at50, 50)).toFixed(2)} wall, ${(percentile(cEnd, 50) / percentile(c50, 50)).toFixed(2)} CPU (target ≤ 1.5)`,
  );
  console.log(
    `  without the GC pauses inside each request (the host's parsed garbage is collected there too): p50 ${percentile(g50, 50).toFixed(2)} → ${percentile(gEnd, 50).toFixed(2)} ms, ratio ${(percentile(gEnd, 50) / percentile(g50, 50)).toFixed(2)}; GC in the last window: p50 ${percentile(
      [...r.gc.slice(longTurns - 50)].sort((a, b) => a - b),
      50,
    ).toFixed(2)} ms`,
  );
  console.log(
    `  whole session: p50 ${percentile(all, 50).toFixed(2)} ms, p95 ${percentile(all, 95).toFixed(2)} ms, max ${all[all.length - 1]!.toFixed(2)} ms`,
  );
  console.log(
    `  SHA-256 of the serialized history once at turn ${longTurns}: ${r.sha.get(longTurns)!.toFixed(2)} ms (${r.historyChars.get(longTurns)} chars); at turn 50: ${r.sha.get(50)!.toFixed(2)} ms`,
  );
  console.log(
    `  after the result, until the next request could start: p50 ${p50At(r.after, 50).toFixed(2)} ms around turn 50, ${p50At(r.after, longTurns - 25).toFixed(2)} ms around turn ${longTurns}`,
  );
  if (r.parse.length > 0)
    console.log(
      `  of which the body memo's parse: p50 ${p50At(r.parse, 50).toFixed(2)} ms around turn 50, ${p50At(r.parse, longTurns - 25).toFixed(2)} ms around turn ${longTurns}`,
    );
  if (r.compare.size === 0) return;
  console.log(
    `  comparing the history with the previous request's rebuilt copy (the floor of recognising it): ${r.compare.get(50)!.toFixed(2)} ms at turn 50, ${r.compare.get(longTurns)!.toFixed(2)} ms at turn ${longTurns}`,
  );
  console.log(
    `  comparing each request's history once with the previous request's objects, kept a request long (what recognition compares with), p50 of each window: ${p50At(r.compareSent, 50).toFixed(2)} ms wall, ${p50At(r.compareSentCpu, 50).toFixed(2)} ms CPU at turns 26–75; ${p50At(r.compareSent, longTurns - 25).toFixed(2)} ms wall, ${p50At(r.compareSentCpu, longTurns - 25).toFixed(2)} ms CPU at turns ${longTurns - 49}–${longTurns}`,
  );
  // The target set against the floors, same run: a request that only hashed (or only compared)
  // its history once, and did nothing else, would already be this many times the turn-50 p50.
  const p50 = percentile(at50, 50);
  console.log(
    `  floors at turn ${longTurns} / p50 at turn 50: SHA-256 once ${(r.sha.get(longTurns)! / p50).toFixed(2)}, comparison alone ${(r.compare.get(longTurns)! / p50).toFixed(2)} (the target's 1.5 leaves ${(1.5 * p50).toFixed(2)} ms at turn ${longTurns})`,
  );
  console.log(
    `  so the p50 ratio cannot go below 1 + the comparison / p50 at turn 50 = ${(1 + r.compare.get(longTurns)! / p50).toFixed(2)} (the request at turn ${longTurns} does the turn-50 request's work on its new content, and compares)`,
  );
  console.log(
    `  beyond that floor: (p50 at turn ${longTurns} − the comparison) / p50 at turn 50 = ${((percentile(atEnd, 50) - r.compare.get(longTurns)!) / p50).toFixed(2)}`,
  );
}

/**
 * One session of `fixture`'s requests through the request chain, arriving as `host` sends them;
 * wall ms per request (from the call until its result is emitted).
 */
async function callsRun(host: Host, fixture: CallsSession): Promise<number[]> {
  const dir = mkdtempSync(join(tmpdir(), 'tt-bench-calls-'));
  const vault = await createVault({ path: join(dir, 'vault.sqlite3') });
  const counter = createTiktokenCounter('o200k_base');
  const input = new Subject<Step<ProviderRequest>>();
  let emitted = 0;
  let emittedAt = 0;
  const sub = input.pipe(requestChain(vault, counter)).subscribe(() => {
    emittedAt = performance.now();
    emitted++;
  });
  const texts = fixture.messages.map((m) => JSON.stringify(m));
  const head = JSON.stringify(fixture.top).slice(0, -1);
  const bodies = new BodyMemo();
  const wall: number[] = [];
  try {
    for (const [t, n] of fixture.ends.entries()) {
      const list = `[${texts.slice(0, n).join(',')}]`;
      const body = host === 'gateway' ? Buffer.from(`${head},"messages":${list}}`) : undefined;
      const messages = host === 'rebuild' ? (JSON.parse(list) as unknown[]) : fixture.messages.slice(0, n);
      const before = emitted;
      const w0 = performance.now();
      let request = { ...fixture.top, messages } as ProviderRequest;
      if (body !== undefined) {
        const parsed = bodies.parse(body, 'messages', 'bench', () => 'calls');
        if (parsed === undefined) throw new Error('body memo did not parse the body');
        request = parsed.value as unknown as ProviderRequest;
      }
      input.next(createStep(request, { sessionId: 'calls', requestId: `r${t}` }));
      while (emitted === before) await new Promise((r) => setImmediate(r));
      wall.push(emittedAt - w0);
    }
    return wall;
  } finally {
    sub.unsubscribe();
    counter.dispose?.();
    await vault.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Parallel tool calls against single calls, same run: per wire format and host mode, the p50 per
 * request of sessions of three calls per assistant message (results shuffled) and of their
 * single-call twins (same turns, same output text per turn), `--parallel-repeat` sessions each,
 * taking turns, pooled.
 */
async function parallelCalls(argv: readonly string[], gc: () => void): Promise<void> {
  const turns = flag(argv, '--parallel-turns', 200);
  const repeat = flag(argv, '--parallel-repeat', 3);
  const formats: readonly SessionFormat[] = ['chat', 'anthropic'];
  console.log(
    `\nparallel tool calls: ${turns}-request sessions, 3 calls per assistant message (results in a shuffled order) beside 1, same output text per turn; p50 per request over ${repeat} sessions each`,
  );
  // A discarded pair first (the JIT's warm-up).
  for (const calls of [1, 3]) await callsRun('rebuild', callsSession({ turns: 30, calls, run: ' (warm-up)' }));
  let runs = 0;
  for (const format of formats)
    for (const host of HOSTS) {
      const p50: Record<1 | 3, number[]> = { 1: [], 3: [] };
      for (let k = 0; k < repeat; k++)
        for (const calls of [1, 3] as const) {
          gc();
          const fixture = callsSession({ turns, calls, format, run: ` (calls ${++runs})` });
          p50[calls].push(...(await callsRun(host, fixture)));
        }
      const [one, three] = [median(p50[1]), median(p50[3])];
      console.log(
        `  ${format.padEnd(9)} ${host.padEnd(7)}: single-call p50 ${one.toFixed(2)} ms, parallel-call p50 ${three.toFixed(2)} ms, ratio ${(three / one).toFixed(2)} (target ≤ 1.5)`,
      );
    }
}
