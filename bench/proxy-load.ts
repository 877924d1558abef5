/**
 * `npm run bench -- proxy-load [--clients 32] [--seconds 60] [--warm-up 60] [--workers 1,2]
 * [--max-memory-bytes n] [--turns 40]`: the gateway under sustained load (issue
 * 32), one worker and `--workers 2` in one run, with the same clients sending the same
 * conversations for the same time to each.
 *
 * The proxy runs as the real CLI in a child process on a fresh SQLite vault; a loopback upstream
 * and the load generator share this process, and both are kept cheap so that the proxy gets the
 * machine: each client's body is built from the JSON of its earlier items, kept as bytes (only the
 * new items are serialized), the upstream answers a prepared buffer and only looks for receipt
 * markers in what it received (a byte search), and every receipt is verified after the timed
 * window. Each client is an agent on its own keep-alive connection (the cluster primary only hands
 * connections over): a conversation that grows by one tool call and one large terminal output
 * (6–40 kB, a test run with a few failures) per turn, sent whole every turn, a new session after
 * `--turns` turns. Per worker count:
 * - answers and errors (non-200 or failed requests) in `--seconds` seconds;
 * - p50 / p95 added latency: time through the proxy minus the direct upstream's p50 for the same
 *   bodies (measured first, against the upstream alone);
 * - CPU per answer of the proxy's processes and of this process (load generator and upstream): on
 *   2 cores, one worker's processes use c cores (more than one: V8's helper threads) and this
 *   process l cores beside two workers, so 2 workers can serve at most about (2 − l) / c × what 1
 *   does at the same CPU per answer, which is printed beside the ratio; and the cores the proxy's
 *   processes used (CPU time over the window): answers = cores used / CPU per answer;
 * - every receipt the upstream saw, recovered afterwards through the recovery tool in the session
 *   and tenant it was delivered to, paged to the end, its content hashing to its id (lost = not so);
 * - the proxy's CPU per answer over each 20 s of the window (whether serving costs more as the
 *   process ages);
 * - RSS of the proxy's processes (primary, workers and their children), summed, every 5 s, against
 *   the cap: `--max-memory-bytes` as the CLI resolves it for that worker count, which is the whole
 *   gateway's (primary and workers). RSS "levels off" when every sample is under the cap and the
 *   least-squares trend of the last 30 s of samples grows them by less than 5 % over 20 s (a trend:
 *   one sample swings ±5 % with the garbage collections; runs of at least 40 s, shorter print n/a).
 * - the machine's pace before and after each row's window (`pace ms`: this process hashing and
 *   scanning one 40-turn body 20 times, the proxy idle): the same work every time, so rows of
 *   different pace ran on a machine of different speed, which the ratio cannot tell apart from a
 *   gateway of different speed. Beside the ratio, the ratio of answers × pace (each row's answers
 *   at its mean pace): what the machine's drift between rows did to it. The target is on the
 *   answers alone;
 * - the machine's idle cores over the window (what neither the proxy nor this process used), and
 *   its stolen cores when the hypervisor took any;
 * - the connections the clients opened (one each, more when the proxy closed one) and, for a row
 *   with errors, the end of the proxy's stderr (a worker's fatal error, the primary's warnings).
 * Before the window, untimed and the same for every gateway: each client's first two requests
 * (each worker loads its modules and tokenizer tables once), then `--warm-up` seconds (default 60,
 * 0 for none) of the full load, so the window measures the steady state a long-running gateway
 * serves in. Without it the window also holds the workers' first minute: V8 still optimizing the
 * request path (on its helper threads, which one worker gets beside its main thread for free and
 * two workers on two cores pay for: 11 % of a core in a worker's 10–20 s, 4 % in its 50–60 s) and
 * the heaps and the bounded memos filling to the load's size (one worker's RSS climbs for about its
 * first 100 s, then stays). RSS is sampled over the warm-up too, printed before a `|`, and every
 * sample is held to the cap; the trend is the window's. Errors while warming up count with the
 * window's. The window counts after a ramp of 2 s of the load that is not counted, so that it
 * opens and closes on a full pipeline (each client a request in flight), as a window inside a
 * steady load does. The proxy starts in a session of its own (`detached`), as a gateway started apart from
 * its clients is (Linux's autogroup shares the CPU between sessions).
 * `TT_BENCH_NODE_OPTIONS` / `TT_BENCH_NODE_ARGS` give the proxy's processes Node flags.
 * `--workers` lists the runs in order (a count may repeat: `1,2,2,1` cancels a steady drift of
 * the machine; the ratio is then of the mean answers of each count's runs).
 * Then each target with pass / fail: 2 workers answer ≥ 1.4 × what 1 did, no errors, no lost
 * receipts, RSS levels off under the cap. The load generator shares the machine, so on a loaded
 * box the figures are indicative; compare the two rows of one run.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from 'undici';
import { sessionOf, tenantOf } from '../adapters/proxy/request-identity.js';
import { loadProxyConfig } from '../src/config/proxy.js';
import { referencedArtifacts } from '../src/receipts/index.js';
import { createTerminator } from '../src/runtime/index.js';
import { artifactIdFor } from '../src/vault/identity.js';
import { CHAT_ANSWER, printTable, rssOf, tree } from './_support.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const KEY = 'Bearer sk-proxy-load';
const SAMPLE_MS = 5000;
/**
 * "Levels off": the trend of the last LEVEL_TREND_S of samples (least squares), carried over
 * LEVEL_WINDOW_S, grows them by less than LEVEL_GROWTH. A trend, not single samples: a worker's RSS
 * swings by ±5 % from one sample to the next with its garbage collections.
 */
const LEVEL_TREND_S = 30;
/** Samples taken over `seconds`. */
const samplesIn = (seconds: number): number => seconds / (SAMPLE_MS / 1000);
const LEVEL_WINDOW_S = 20;
const LEVEL_GROWTH = 1.05;
const TARGET_RATIO = 1.4;
/** Requests each client sends before the timed warm-up (its first: modules and tables load). */
const FIRST_REQUESTS = 2;
/** Characters of the proxy's stderr kept, printed when a gateway had errors. */
const STDERR_KEPT = 16_384;
/** Load before the window's count starts, so that it starts on a full pipeline. */
const RAMP_MS = 2000;

interface Options {
  clients: number;
  seconds: number;
  workers: number[];
  maxMemoryBytes: number | undefined;
  turns: number;
  /** Seconds of full load before the window, untimed. */
  warmUp: number;
}

function parseArgs(argv: readonly string[]): Options {
  const value = (name: string): string | undefined => {
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const int = (names: readonly string[], fallback: number, least = 1): number => {
    const name = names.find((n) => argv.includes(n));
    const raw = name === undefined ? undefined : value(name);
    const n = raw === undefined ? fallback : Number(raw);
    if (!Number.isSafeInteger(n) || n < least)
      throw new Error(`${names[0]} must be an integer of at least ${least}, got ${String(raw)}`);
    return n;
  };
  const memory = value('--max-memory-bytes');
  const o = {
    clients: int(['--clients'], 32),
    seconds: int(['--seconds', '--duration'], 60),
    workers: (value('--workers') ?? '1,2').split(',').map(Number),
    maxMemoryBytes: memory === undefined ? undefined : Number(memory),
    turns: int(['--turns'], 40),
    warmUp: int(['--warm-up'], 60, 0),
  };
  const step = SAMPLE_MS / 1000;
  if (o.seconds % step !== 0)
    throw new Error(`--seconds must be a multiple of ${step} (the RSS sample interval), got ${o.seconds}`);
  return o;
}

/** A terminal output of a test run: `lines` lines, a few failures, different for every (session, turn). */
export function toolOutput(session: string, turn: number): string {
  const lines = 150 + ((turn * 37 + session.length * 11) % 850);
  const out: string[] = [];
  for (let i = 0; i < lines; i++)
    out.push(
      i % 97 === 13
        ? `FAILED tests/test_${session}_${turn}.py::test_case_${i} - AssertionError: expected ${i} got ${i + 1}`
        : `tests/test_${session}_${turn}.py::test_case_${i} PASSED [${Math.floor((i * 100) / lines)}%]`,
    );
  return out.join('\n');
}

type Msg = Record<string, unknown>;
const HEAD = Buffer.from('{"model":"gpt-4o","messages":[');
const TAIL = Buffer.from(']}');
const COMMA = Buffer.from(',');

/**
 * One agent: a conversation that grows by a tool call and its output every turn. Its body is one
 * buffer with room to grow: each item is serialized once, when added, and written after the ones
 * before it, so a turn costs its new items (building the whole body anew each turn cost this
 * process a copy of the history per request, and the garbage collections of those copies).
 */
export class Agent {
  #session = '';
  #turn = 0;
  #generation = 0;
  /** HEAD and the items so far, comma-separated, in `#body[0, #end)`; TAIL is written after them per request. */
  #body = Buffer.alloc(1 << 16);
  #end = 0;
  /** Each session's header and opening request (its instruction prefix), for the recovery check. */
  readonly sessions: { header: string; body: Msg }[] = [];

  constructor(
    readonly name: string,
    readonly maxTurns: number,
  ) {
    this.#restart();
  }

  #restart(): void {
    this.#session = `${this.name}-${this.#generation++}`;
    this.#turn = 0;
    const opening: Msg[] = [
      { role: 'system', content: `You are coding agent ${this.#session}. Use the terminal.` },
      { role: 'user', content: 'Make the test suite pass.' },
    ];
    this.#end = HEAD.copy(this.#body, 0);
    for (const m of opening) this.#append(m);
    this.sessions.push({ header: this.#session, body: { model: 'gpt-4o', messages: opening } });
  }

  /** Write `item`'s JSON after the items so far (doubling the buffer when it is full). */
  #append(item: Msg): void {
    const bytes = Buffer.from(JSON.stringify(item));
    const need = this.#end + COMMA.length + bytes.length + TAIL.length;
    if (need > this.#body.length) {
      const grown = Buffer.alloc(Math.max(need, 2 * this.#body.length));
      this.#body.copy(grown, 0, 0, this.#end);
      this.#body = grown;
    }
    if (this.#end > HEAD.length) this.#end += COMMA.copy(this.#body, this.#end);
    this.#end += bytes.copy(this.#body, this.#end);
  }

  get session(): string {
    return this.#session;
  }

  /**
   * The next request's body: a view of this agent's buffer, valid until the next call (each client
   * sends its request and reads the answer before it asks for the next; copy it to keep it).
   */
  next(): Buffer {
    if (this.#turn >= this.maxTurns) this.#restart();
    const id = `call_${this.#turn}`;
    this.#append({
      role: 'assistant',
      content: null,
      tool_calls: [
        { id, type: 'function', function: { name: 'terminal', arguments: `{"command":"pytest -x ${this.#turn}"}` } },
      ],
    });
    this.#append({ role: 'tool', tool_call_id: id, content: toolOutput(this.#session, this.#turn) });
    this.#turn++;
    const tail = TAIL.copy(this.#body, this.#end);
    return this.#body.subarray(0, this.#end + tail);
  }
}

const MARKER = Buffer.from('Token Terminator');
const ESCAPED_NEWLINE = Buffer.from('\\n');
/** How far either side of a marker its line is looked for (a receipt line is far shorter). */
const LINE_REACH = 4096;

/** Artifact ids on the lines (JSON-escaped `\n`) of `body` that carry the receipt marker: a byte search, no parse. */
function receiptIds(body: Buffer): string[] {
  const ids: string[] = [];
  let at = body.indexOf(MARKER);
  while (at >= 0) {
    const from = Math.max(0, body.lastIndexOf(ESCAPED_NEWLINE, at) + 2, at - LINE_REACH);
    let to = body.indexOf(ESCAPED_NEWLINE, at);
    if (to < 0 || to > at + LINE_REACH) to = Math.min(body.length, at + LINE_REACH);
    ids.push(...referencedArtifacts(body.toString('utf8', from, to)));
    at = body.indexOf(MARKER, Math.max(to, at + 1));
  }
  return ids;
}

/** The upstream: answers every request with a prepared buffer, and keeps the receipts each session's requests name. */
function startUpstream(receipts: Map<string, Set<string>>): Promise<Server> {
  const answer = Buffer.from(CHAT_ANSWER);
  const server = createServer({ noDelay: true }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': answer.length });
      res.end(answer);
      const ids = receiptIds(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
      if (ids.length === 0) return;
      const session = String(req.headers['x-load-session'] ?? '');
      const set = receipts.get(session) ?? new Set<string>();
      for (const id of ids) set.add(id);
      receipts.set(session, set);
    });
  });
  server.keepAliveTimeout = 65_000;
  return new Promise((ok) => server.listen(0, '127.0.0.1', () => ok(server)));
}

async function startProxy(
  upstream: string,
  db: string,
  workers: number,
  memory: number | undefined,
): Promise<{ url: string; child: ChildProcess; stderr: () => string }> {
  const args = ['src/cli/main.ts', 'proxy', '--port', '0', '--workers', String(workers), '--upstream', upstream];
  args.push('--db', db, '--quiet', ...(memory === undefined ? [] : ['--max-memory-bytes', String(memory)]));
  // Node flags NODE_OPTIONS does not take (e.g. --cpu-prof --cpu-prof-dir=…), passed on to the workers too.
  const nodeArgs = (process.env['TT_BENCH_NODE_ARGS'] ?? '').split(/\s+/).filter((a) => a !== '');
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', ...args], {
    cwd: ROOT,
    env: {
      PATH: process.env['PATH'] ?? '',
      HOME: dirname(db),
      TOKEN_TERMINATOR_MAX_PAGE_CHARS: '200000',
      // Node flags for the proxy's processes (e.g. a heap limit to compare with), when given.
      ...(process.env['TT_BENCH_NODE_OPTIONS'] === undefined
        ? {}
        : { NODE_OPTIONS: process.env['TT_BENCH_NODE_OPTIONS'] }),
    },
    // A session of its own, as a gateway started apart from its clients has: where the kernel shares
    // the CPU between sessions (Linux's autogroup), the proxy's processes and this load generator
    // then compete as two programs, not as one group whose share the worker count cannot raise.
    detached: true,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  // What the proxy's processes wrote last (a worker's fatal error, the primary's warnings), for the report.
  let err = '';
  const url = await new Promise<string>((ok, fail) => {
    child.stderr!.on('data', (c: Buffer) => {
      err = (err + c.toString()).slice(-STDERR_KEPT);
      const m = /listening on (http:\/\/[\d.]+:\d+)/.exec(err);
      if (m !== null) ok(m[1]!);
    });
    child.once('exit', (code) => fail(new Error(`proxy exited ${code}: ${err}`)));
  });
  return { url, child, stderr: () => err };
}

/** User + system CPU (ms) of one process (0 when gone). */
function cpuOf(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    // utime and stime (fields 14 and 15 of stat), in clock ticks of 10 ms on Linux.
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return 0;
  }
}

/** The machine's idle and stolen CPU time (ms, all cores) so far, from /proc/stat. */
function machineSpare(): { idle: number; steal: number } {
  const f = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/).map(Number);
  // cpu user nice system idle iowait irq softirq steal …, in clock ticks of 10 ms.
  return { idle: (f[4]! + f[5]!) * 10, steal: f[8]! * 10 };
}

const treeRss = (pid: number): number => tree(pid).reduce((n, p) => n + rssOf(p), 0);
const treeCpu = (pid: number): number => tree(pid).reduce((n, p) => n + cpuOf(p), 0);
const ownCpu = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

const pct = (xs: readonly number[], p: number): number => {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};
const mb = (bytes: number): string => `${Math.round(bytes / 2 ** 20)}`;

async function post(client: Client, body: Buffer, session: string): Promise<number> {
  const res = await client.request({
    path: '/v1/chat/completions',
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      authorization: KEY,
      'x-token-terminator-session': session,
      'x-load-session': session,
    },
    body,
  });
  await res.body.dump();
  return res.statusCode;
}

/** p50 of the upstream alone for the bodies of one conversation (what the proxy adds is on top). */
async function directP50(upstream: string, turns: number): Promise<number> {
  const agent = new Agent('direct', turns);
  const bodies = Array.from({ length: turns }, () => Buffer.from(agent.next()));
  const client = new Client(upstream);
  const times: number[] = [];
  for (let round = 0; round < 3; round++)
    for (const body of bodies) {
      const started = performance.now();
      await post(client, body, 'direct');
      times.push(performance.now() - started);
    }
  await client.close();
  return pct(times, 50);
}

/**
 * The machine's pace just before and after a row: milliseconds this process takes to SHA-256 one
 * 40-turn body and scan its text character by character, 20 times (the median of 3 rounds), the
 * proxy stopped. The same work every time and no allocation (this process's own heap, which grows
 * with the row's answers, must not slow it), so a row whose probe took longer ran on a slower
 * machine (this VM's speed moves by a quarter from one minute to the next), which the ratio
 * cannot tell from a slower gateway.
 */
/** What {@link pace} works on: one body, as bytes and as text. */
interface Probe {
  readonly body: Buffer;
  readonly text: string;
}

function pace({ body, text }: Probe): number {
  const rounds: number[] = [];
  let sink = 0;
  for (let round = 0; round < 3; round++) {
    const started = performance.now();
    for (let i = 0; i < 20; i++) {
      sink ^= createHash('sha256').update(body).digest()[0]!;
      for (let c = 0; c < text.length; c++) sink = (sink * 31 + text.charCodeAt(c)) | 0;
    }
    rounds.push(performance.now() - started);
  }
  // The result is used, so the loop is not optimized away.
  return pct(rounds, 50) + (sink === 0.5 ? 1 : 0);
}

/** What a row measured, filled in as it runs. */
interface Measured {
  readonly workers: number;
  /** The cap as the CLI resolves it for this worker count (the whole gateway's). */
  readonly cap: number;
  /** {@link pace} just before the window and just after it (the proxy idle). */
  pace: [number, number];
  answers: number;
  errors: number;
  readonly latencies: number[];
  /** RSS every 5 s over the warm-up, then over the window (every sample under the cap; the trend is of the last ones). */
  readonly rss: number[];
  /** How many of `rss` are the warm-up's. */
  warmSamples: number;
  /** The proxy's CPU (ms, over the window) and the answers so far, every 5 s of the window. */
  readonly progress: { cpu: number; answers: number }[];
  /** The machine's idle and stolen cores over the window (what the gateway could not or was not let use). */
  spare: { idle: number; steal: number };
  /** Connections the clients opened (each at least one; more when the proxy closed one). */
  connects: number;
  proxyCpuMs: number;
  primaryCpuMs: number;
  loadCpuMs: number;
}

/** A row as reported: what it measured, the primary's RSS at the end, and the receipts checked and lost. */
interface RunResult extends Readonly<Measured> {
  readonly primaryRss: number;
  readonly receipts: number;
  readonly lost: number;
}

/** Whether `rss` (samples every 5 s) levels off under `cap` (see the module comment); undefined for short runs. */
function levelsOff(rss: readonly number[], cap: number, seconds: number): boolean | undefined {
  if (seconds < LEVEL_TREND_S + 10) return undefined;
  return Math.max(...rss) < cap && trend(rss) < LEVEL_GROWTH - 1;
}

/** The proxy's CPU per answer (ms) over each LEVEL_WINDOW_S of the window (does serving cost more as the process ages?). */
function perWindow(progress: readonly { cpu: number; answers: number }[]): string[] {
  const step = samplesIn(LEVEL_WINDOW_S);
  const out: string[] = [];
  for (let i = step; i < progress.length; i += step) {
    const [a, b] = [progress[i - step]!, progress[i]!];
    out.push(((b.cpu - a.cpu) / Math.max(1, b.answers - a.answers)).toFixed(1));
  }
  return out;
}

/** Growth over LEVEL_WINDOW_S at the least-squares slope of the last LEVEL_TREND_S of samples, as a share of their mean. */
function trend(rss: readonly number[]): number {
  const ys = rss.slice(-(samplesIn(LEVEL_TREND_S) + 1));
  const mx = (ys.length - 1) / 2;
  const my = ys.reduce((n, y) => n + y, 0) / ys.length;
  let sxy = 0;
  let sxx = 0;
  ys.forEach((y, x) => {
    sxy += (x - mx) * (y - my);
    sxx += (x - mx) ** 2;
  });
  return ((sxy / sxx) * samplesIn(LEVEL_WINDOW_S)) / my;
}

/** Every receipt the upstream saw, recovered in the session and tenant it was delivered to: [checked, lost]. */
async function verifyReceipts(
  dir: string,
  db: string,
  agents: readonly Agent[],
  receipts: ReadonlyMap<string, ReadonlySet<string>>,
): Promise<[number, number]> {
  const tt = await createTerminator({ env: { HOME: dir }, overrides: { dbPath: db, maxPageChars: 200_000 } });
  const tenant = tenantOf({ authorization: KEY });
  let total = 0;
  let lost = 0;
  for (const agent of agents)
    for (const s of agent.sessions) {
      const ids = receipts.get(s.header);
      if (ids === undefined) continue;
      const sessionId = sessionOf({ 'x-token-terminator-session': s.header }, s.body, 'chat', tenant);
      for (const id of ids) {
        total++;
        let content = '';
        let offset = 0;
        let ok = false;
        for (let guard = 0; guard < 1000; guard++) {
          const r = JSON.parse(
            await tt.recoveryTool.handle(
              { action: 'artifact_get', artifact_id: id, offset, limit: 200_000 },
              { sessionId, tenant },
            ),
          ) as { content?: string; next_offset?: number | null; error?: unknown };
          if (r.error !== undefined) break;
          content += r.content ?? '';
          if (r.next_offset === null) {
            ok = artifactIdFor(content) === id || id.startsWith(artifactIdFor(content));
            break;
          }
          offset = r.next_offset ?? Number.NaN;
        }
        if (!ok) lost++;
      }
    }
  await tt.close();
  return [total, lost];
}

/** One gateway under load: its proxy, vault, upstream and clients, and what its window measured. */
interface Gateway {
  /** What it measured so far. */
  readonly m: Measured;
  readonly dir: string;
  readonly db: string;
  readonly child: ChildProcess;
  readonly pid: number;
  /** The proxy's stderr, its last STDERR_KEPT characters. */
  readonly stderr: () => string;
  readonly upstream: Server;
  /** The receipts each session's requests named, as this gateway's upstream saw them. */
  readonly seen: Map<string, Set<string>>;
  readonly agents: Agent[];
  readonly clients: Client[];
}

/** Starts a gateway of `workers` workers on a fresh vault, behind an upstream of its own, with the same clients as every other. */
async function open(o: Options, workers: number): Promise<Gateway> {
  const dir = mkdtempSync(join(tmpdir(), 'tt-proxy-load-'));
  const db = join(dir, 'vault.sqlite3');
  const cap = loadProxyConfig({
    env: {},
    flags: { workers, ...(o.maxMemoryBytes === undefined ? {} : { maxMemoryBytes: o.maxMemoryBytes }) },
  }).maxMemoryBytes;
  const seen = new Map<string, Set<string>>();
  const upstream = await startUpstream(seen);
  const url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  const proxy = await startProxy(url, db, workers, o.maxMemoryBytes);
  // The same clients with the same conversations for every gateway.
  const agents = Array.from({ length: o.clients }, (_, i) => new Agent(`c${i}`, o.turns));
  const clients = agents.map(() => new Client(proxy.url, { headersTimeout: 120_000, bodyTimeout: 120_000 }));
  const m: Measured = {
    workers,
    cap,
    pace: [0, 0],
    answers: 0,
    errors: 0,
    latencies: [],
    rss: [],
    warmSamples: 0,
    progress: [],
    spare: { idle: 0, steal: 0 },
    connects: 0,
    proxyCpuMs: 0,
    primaryCpuMs: 0,
    loadCpuMs: 0,
  };
  const g: Gateway = {
    m,
    dir,
    db,
    child: proxy.child,
    pid: proxy.child.pid!,
    stderr: proxy.stderr,
    upstream,
    seen,
    agents,
    clients,
  };
  for (const client of clients) client.on('connect', () => m.connects++);
  return g;
}

const sleep = (ms: number): Promise<void> => new Promise((ok) => setTimeout(ok, ms));

/**
 * Waits until the gateway's processes are idle (under a tenth of a core over 250 ms, at most 20 s):
 * what it still does for the answers it gave (its accounting runs after each answer, a backlog
 * behind) is part of what it did for the window, and the pace probe must not run beside it.
 */
async function quiesce(pid: number): Promise<void> {
  for (const end = performance.now() + 20_000; performance.now() < end;) {
    const before = treeCpu(pid);
    await sleep(250);
    if (treeCpu(pid) - before < 25) return;
  }
}

/** Each client's first requests, untimed: each worker loads its modules and tokenizer tables once. */
async function first(g: Gateway): Promise<void> {
  await Promise.all(
    g.agents.map(async (agent, i) => {
      for (let n = 0; n < FIRST_REQUESTS; n++)
        if ((await post(g.clients[i]!, agent.next(), agent.session).catch(() => 0)) !== 200) g.m.errors++;
    }),
  );
}

/**
 * `seconds` of the full load on `g`, sampling RSS every 5 s, then waiting for the gateway to be idle
 * again; errors count always. The `counted` run is the window: it counts after a ramp of RAMP_MS
 * that is not counted, so that it opens and closes on a full pipeline (each client a request in
 * flight), as a window inside a steady load does, and neither the first answers' wait nor the
 * requests cut off at its end weigh on a row; it counts the answers and latencies of the requests
 * answered within it, samples the proxy's CPU every 5 s, and takes the CPU of the gateway's
 * processes and of this one (the load generator and upstream) over it and the machine's idle and
 * stolen cores. Uncounted, it is the warm-up.
 */
async function serve(g: Gateway, seconds: number, counted: boolean): Promise<void> {
  let running = true;
  let counting = false;
  const driven = Promise.all(
    g.agents.map(async (agent, i) => {
      const client = g.clients[i]!;
      while (running) {
        const body = agent.next();
        const started = performance.now();
        try {
          const status = await post(client, body, agent.session);
          if (status !== 200) g.m.errors++;
          else if (counting) {
            g.m.answers++;
            g.m.latencies.push(performance.now() - started);
          }
        } catch {
          g.m.errors++;
        }
      }
    }),
  );
  if (counted) await sleep(RAMP_MS);
  const cpu0 = { proxy: treeCpu(g.pid), primary: cpuOf(g.pid), load: ownCpu() };
  const spare0 = machineSpare();
  const started = performance.now();
  counting = counted;
  if (counted) {
    g.m.rss.push(treeRss(g.pid));
    g.m.progress.push({ cpu: 0, answers: 0 });
  }
  for (let left = seconds * 1000; left > 0; left -= SAMPLE_MS) {
    await sleep(Math.min(SAMPLE_MS, left));
    g.m.rss.push(treeRss(g.pid));
    if (counted) g.m.progress.push({ cpu: treeCpu(g.pid) - cpu0.proxy, answers: g.m.answers });
  }
  counting = false;
  if (counted) {
    const spare1 = machineSpare();
    const ms = performance.now() - started;
    g.m.spare = { idle: (spare1.idle - spare0.idle) / ms, steal: (spare1.steal - spare0.steal) / ms };
    g.m.proxyCpuMs = treeCpu(g.pid) - cpu0.proxy;
    g.m.primaryCpuMs = cpuOf(g.pid) - cpu0.primary;
    g.m.loadCpuMs = ownCpu() - cpu0.load;
  } else g.m.warmSamples = g.m.rss.length;
  running = false;
  await driven;
  await quiesce(g.pid);
}

/** Stops the gateway, then recovers every receipt its upstream saw. */
async function close(g: Gateway): Promise<RunResult> {
  const primaryRss = rssOf(g.pid);
  await Promise.all(g.clients.map((c) => c.close().catch(() => undefined)));
  const exit = new Promise((r) => g.child.once('exit', r));
  g.child.kill('SIGTERM');
  await exit;
  if (g.m.errors > 0)
    console.log(`workers ${g.m.workers}: ${g.m.errors} errors; the proxy's stderr ends:\n${g.stderr()}`);
  g.upstream.close();
  const [receipts, lost] = await verifyReceipts(g.dir, g.db, g.agents, g.seen);
  rmSync(g.dir, { recursive: true, force: true });
  return { ...g.m, primaryRss, receipts, lost };
}

/** One row: a gateway started, its first requests, its warm-up, its window between two pace probes, stopped. */
async function row(o: Options, workers: number, probe: Probe): Promise<RunResult> {
  const g = await open(o, workers);
  await first(g);
  if (o.warmUp > 0) await serve(g, o.warmUp, false);
  g.m.pace[0] = pace(probe);
  await serve(g, o.seconds, true);
  g.m.pace[1] = pace(probe);
  return close(g);
}

export async function main(argv: string[]): Promise<void> {
  const o = parseArgs(argv);
  const upstream = await startUpstream(new Map());
  const direct = await directP50(`http://127.0.0.1:${(upstream.address() as AddressInfo).port}`, o.turns);
  upstream.close();
  console.log(
    `${o.clients} clients × ${o.seconds} s after ${o.warmUp} s of untimed warm-up, conversations of up to ${o.turns} turns with 6–40 kB tool outputs; direct upstream p50 ${direct.toFixed(1)} ms`,
  );
  const probeAgent = new Agent('pace', o.turns);
  for (let turn = 1; turn < o.turns; turn++) probeAgent.next();
  const body = Buffer.from(probeAgent.next());
  const probe: Probe = { body, text: body.toString('utf8') };
  const results: RunResult[] = [];
  for (const workers of o.workers) {
    const r = await row(o, workers, probe);
    results.push(r);
    console.log(
      `workers ${workers}: RSS every 5 s (MiB, all processes): ${r.warmSamples > 0 ? `warm-up ${r.rss.slice(0, r.warmSamples).map(mb).join(' ')} | ` : ''}${r.rss.slice(r.warmSamples).map(mb).join(' ')}` +
        `; the primary: ${mb(r.primaryRss)} MiB, ${r.primaryCpuMs.toFixed(0)} ms CPU in all` +
        `; the proxy's CPU ms per answer every ${LEVEL_WINDOW_S} s: ${perWindow(r.progress).join(' ')}` +
        `; idle cores ${r.spare.idle.toFixed(2)}${r.spare.steal > 0.005 ? `, stolen ${r.spare.steal.toFixed(2)}` : ''}` +
        `; connections opened: ${r.connects}`,
    );
  }
  const level = (r: RunResult): string => {
    const l = levelsOff(r.rss, r.cap, o.seconds);
    return l === undefined ? 'n/a' : l ? 'yes' : 'no';
  };
  printTable([
    [
      'workers',
      'answers',
      'errors',
      'answers/s',
      'added p50 ms',
      'added p95 ms',
      'proxy CPU ms/answer',
      'proxy cores',
      'load CPU ms/answer',
      'receipts',
      'lost',
      'RSS max MiB',
      'cap MiB',
      'levels off under cap',
      'pace ms before / after',
    ],
    ...results.map((r) => [
      String(r.workers),
      String(r.answers),
      String(r.errors),
      (r.answers / o.seconds).toFixed(1),
      (pct(r.latencies, 50) - direct).toFixed(1),
      (pct(r.latencies, 95) - direct).toFixed(1),
      (r.proxyCpuMs / Math.max(1, r.answers)).toFixed(1),
      (r.proxyCpuMs / (o.seconds * 1000)).toFixed(2),
      (r.loadCpuMs / Math.max(1, r.answers)).toFixed(1),
      String(r.receipts),
      String(r.lost),
      mb(Math.max(...r.rss)),
      mb(r.cap),
      level(r),
      r.pace.map((ms) => ms.toFixed(0)).join(' / '),
    ]),
  ]);
  const verdict = (ok: boolean | undefined): string => (ok === undefined ? 'n/a ' : ok ? 'PASS' : 'FAIL');
  // Over every run of each count (`--workers 1,2,2,1` cancels a drift of the machine's load).
  const ones = results.filter((r) => r.workers === 1);
  const twos = results.filter((r) => r.workers === 2);
  if (ones.length > 0 && twos.length > 0) {
    const mean = (rs: readonly RunResult[], f: (r: RunResult) => number): number =>
      rs.reduce((n, r) => n + f(r), 0) / rs.length;
    const ratio =
      mean(twos, (r) => r.answers) /
      Math.max(
        1,
        mean(ones, (r) => r.answers),
      );
    // Cores over the window: one worker's processes use more than one (V8's helper threads), and
    // two can use at most the machine less the load generator beside them.
    const cores = (rs: readonly RunResult[], f: (r: RunResult) => number): number => mean(rs, f) / (o.seconds * 1000);
    const one = cores(ones, (x) => x.proxyCpuMs);
    const ceiling = (2 - cores(twos, (x) => x.loadCpuMs)) / Math.max(0.01, one);
    const perAnswer = (rs: readonly RunResult[]): number => mean(rs, (x) => x.proxyCpuMs / Math.max(1, x.answers));
    const runs = ones.length + twos.length > 2 ? ` (mean answers of ${twos.length} and ${ones.length} runs)` : '';
    console.log(
      `${verdict(ratio >= TARGET_RATIO)}  2 workers / 1 worker answers${runs}: ${ratio.toFixed(2)} × (target ≥ ${TARGET_RATIO} ×; one worker used ${one.toFixed(2)} cores, so 2 cores less the load generator allow about ${ceiling.toFixed(2)} × at the same CPU per answer, which two workers spent ${((perAnswer(twos) / perAnswer(ones) - 1) * 100).toFixed(0)} % more of)`,
    );
    // Each row's answers at its mean pace: a diagnostic of the machine's drift, not the target.
    const paced = (r: RunResult): number => (r.answers * (r.pace[0] + r.pace[1])) / 2;
    console.log(
      `      the same with each row's answers × its pace (the machine's drift between rows taken out, not the target): ${(mean(twos, paced) / Math.max(1, mean(ones, paced))).toFixed(2)} ×`,
    );
  }
  const errors = results.reduce((n, r) => n + r.errors, 0);
  console.log(`${verdict(errors === 0)}  errors: ${errors} (target 0)`);
  const lost = results.reduce((n, r) => n + r.lost, 0);
  const checked = results.reduce((n, r) => n + r.receipts, 0);
  console.log(`${verdict(lost === 0 && checked > 0)}  receipts lost: ${lost} of ${checked} (target 0)`);
  for (const r of results)
    console.log(
      `${verdict(levelsOff(r.rss, r.cap, o.seconds))}  workers ${r.workers}: RSS levels off under the cap of ${mb(r.cap)} MiB (max ${mb(Math.max(...r.rss))} MiB; the trend of the last ${LEVEL_TREND_S} s: ${(trend(r.rss) * 100).toFixed(1)} % per ${LEVEL_WINDOW_S} s, target under ${Math.round((LEVEL_GROWTH - 1) * 100)} %)`,
    );
}
