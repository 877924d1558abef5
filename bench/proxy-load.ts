/**
 * `npm run bench -- proxy-load [--clients 32] [--duration 60] [--workers 1,2] [--max-memory-bytes n]
 * [--turns 40]`: the gateway under sustained load (issue 32), one worker and `--workers 2` in one run.
 *
 * The proxy runs as the real CLI in a child process on a fresh SQLite vault; a loopback upstream
 * that answers at once and the load generator share this process. Each client is an agent on its
 * own keep-alive connection: a conversation that grows by one tool call and one large terminal
 * output (6–40 kB, a test run with a few failures) per turn, sent whole every turn, a new session
 * after `--turns` turns. Per worker count:
 * - answers and errors (non-200 or failed requests) in `--duration` seconds;
 * - p50 / p95 added latency: time through the proxy minus the direct upstream's p50 for the same
 *   bodies (measured first, against the upstream alone);
 * - every receipt the upstream saw, recovered afterwards through the recovery tool in the session
 *   and tenant it was delivered to, paged to the end, its content hashing to its id (lost = not so);
 * - RSS of the proxy's processes (primary, workers and their children), summed, every 5 s; it
 *   "levels off" when the last third of the samples grows less than 10 % over the middle third,
 *   and the documented bound is workers × `--max-memory-bytes` (1 GiB per process by default),
 *   plus the primary's own size when there are workers.
 * Finally whether 2 workers answered ≥ 1.4 × what 1 did. The load generator shares the machine,
 * so on a loaded 2-core box the figures are indicative.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from 'undici';
import { sessionOf, tenantOf } from '../adapters/proxy/session.js';
import { referencedArtifacts } from '../src/receipts/index.js';
import { createTerminator } from '../src/runtime/index.js';
import { artifactIdFor } from '../src/vault/identity.js';
import { CHAT_ANSWER, printTable } from './_support.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const KEY = 'Bearer sk-proxy-load';
const DEFAULT_MEMORY = 1_073_741_824;

interface Options {
  clients: number;
  durationS: number;
  workers: number[];
  maxMemoryBytes: number | undefined;
  turns: number;
}

function parseArgs(argv: readonly string[]): Options {
  const value = (name: string): string | undefined => {
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const int = (name: string, fallback: number): number => {
    const raw = value(name);
    const n = raw === undefined ? fallback : Number(raw);
    if (!Number.isSafeInteger(n) || n < 1) throw new Error(`${name} must be a positive integer, got ${String(raw)}`);
    return n;
  };
  const memory = value('--max-memory-bytes');
  return {
    clients: int('--clients', 32),
    durationS: int('--duration', 60),
    workers: (value('--workers') ?? '1,2').split(',').map(Number),
    maxMemoryBytes: memory === undefined ? undefined : Number(memory),
    turns: int('--turns', 40),
  };
}

/** A terminal output of a test run: `lines` lines, a few failures, different for every (session, turn). */
function toolOutput(session: string, turn: number): string {
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

/** One agent: a conversation that grows by a tool call and its output every turn. */
class Agent {
  #session = '';
  #messages: Msg[] = [];
  #turn = 0;
  #generation = 0;
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
    this.#messages = [
      { role: 'system', content: `You are coding agent ${this.#session}. Use the terminal.` },
      { role: 'user', content: 'Make the test suite pass.' },
    ];
  }

  get session(): string {
    return this.#session;
  }

  /** The next request's body; records each session's opening for the recovery check. */
  next(): string {
    if (this.#turn >= this.maxTurns) this.#restart();
    const id = `call_${this.#turn}`;
    this.#messages.push(
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id, type: 'function', function: { name: 'terminal', arguments: `{"command":"pytest -x ${this.#turn}"}` } },
        ],
      },
      { role: 'tool', tool_call_id: id, content: toolOutput(this.#session, this.#turn) },
    );
    this.#turn++;
    const body = { model: 'gpt-4o', messages: this.#messages };
    if (this.#turn === 1)
      this.sessions.push({ header: this.#session, body: { ...body, messages: [...this.#messages] } });
    return JSON.stringify(body);
  }
}

/** The upstream: answers every request at once, and keeps the receipts each session's requests name. */
function startUpstream(receipts: Map<string, Set<string>>): Promise<Server> {
  const server = createServer({ noDelay: true }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(CHAT_ANSWER);
      const session = String(req.headers['x-load-session'] ?? '');
      const ids = referencedArtifacts(Buffer.concat(chunks).toString('utf8').replace(/\\n/g, '\n'));
      if (ids.length === 0) return;
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
): Promise<{ url: string; child: ChildProcess }> {
  const args = ['src/cli/main.ts', 'proxy', '--port', '0', '--workers', String(workers), '--upstream', upstream];
  args.push('--db', db, '--quiet', ...(memory === undefined ? [] : ['--max-memory-bytes', String(memory)]));
  const child = spawn(process.execPath, ['--import', 'tsx', ...args], {
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
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const url = await new Promise<string>((ok, fail) => {
    let err = '';
    child.stderr!.on('data', (c: Buffer) => {
      err += c.toString();
      const m = /listening on (http:\/\/[\d.]+:\d+)/.exec(err);
      if (m !== null) ok(m[1]!);
    });
    child.once('exit', (code) => fail(new Error(`proxy exited ${code}: ${err}`)));
  });
  return { url, child };
}

/** RSS (bytes) of `pid` alone. */
function ownRss(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m === null ? 0 : Number(m[1]) * 1024;
  } catch {
    return 0;
  }
}

/** RSS (bytes) of `pid` and every process below it, from /proc. */
function treeRss(pid: number): number {
  const parents = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const ppid = Number(readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]);
      parents.set(ppid, [...(parents.get(ppid) ?? []), Number(entry)]);
    } catch {
      // gone meanwhile
    }
  }
  let total = 0;
  const stack = [pid];
  while (stack.length > 0) {
    const p = stack.pop()!;
    try {
      const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${p}/status`, 'utf8'));
      total += m === null ? 0 : Number(m[1]) * 1024;
    } catch {
      // gone meanwhile
    }
    stack.push(...(parents.get(p) ?? []));
  }
  return total;
}

const pct = (xs: readonly number[], p: number): number => {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};
const mb = (bytes: number): string => `${Math.round(bytes / 2 ** 20)}`;

async function post(client: Client, body: string, session: string): Promise<number> {
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
  await res.body.arrayBuffer();
  return res.statusCode;
}

/** p50 of the upstream alone for bodies of a conversation at half its turns (what the proxy adds is on top). */
async function directP50(upstream: string, turns: number): Promise<number> {
  const agent = new Agent('direct', turns);
  const bodies = Array.from({ length: turns }, () => agent.next());
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

interface RunResult {
  readonly workers: number;
  readonly answers: number;
  readonly errors: number;
  readonly latencies: number[];
  readonly rss: number[];
  readonly receipts: number;
  readonly lost: number;
  readonly bound: number;
}

async function run(
  o: Options,
  workers: number,
  upstream: string,
  receipts: Map<string, Set<string>>,
): Promise<RunResult> {
  const dir = mkdtempSync(join(tmpdir(), 'tt-proxy-load-'));
  const db = join(dir, 'vault.sqlite3');
  receipts.clear();
  const proxy = await startProxy(upstream, db, workers, o.maxMemoryBytes);
  const rss: number[] = [treeRss(proxy.child.pid!)];
  const sampler = setInterval(() => rss.push(treeRss(proxy.child.pid!)), 5000);
  const latencies: number[] = [];
  let answers = 0;
  let errors = 0;
  const agents = Array.from({ length: o.clients }, (_, i) => new Agent(`w${workers}c${i}`, o.turns));
  const end = performance.now() + o.durationS * 1000;
  await Promise.all(
    agents.map(async (agent) => {
      const client = new Client(proxy.url, { headersTimeout: 120_000, bodyTimeout: 120_000 });
      while (performance.now() < end) {
        const body = agent.next();
        const started = performance.now();
        try {
          const status = await post(client, body, agent.session);
          if (status === 200) {
            answers++;
            latencies.push(performance.now() - started);
          } else errors++;
        } catch {
          errors++;
        }
      }
      await client.close().catch(() => undefined);
    }),
  );
  clearInterval(sampler);
  rss.push(treeRss(proxy.child.pid!));
  // The documented total: workers × the bound, plus the primary (its own size) when there are workers.
  const primary = workers > 1 ? ownRss(proxy.child.pid!) : 0;
  const exit = new Promise((r) => proxy.child.once('exit', r));
  proxy.child.kill('SIGTERM');
  await exit;

  // Every receipt the upstream saw, recovered in the session and tenant it was delivered to.
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
  rmSync(dir, { recursive: true, force: true });
  return {
    workers,
    answers,
    errors,
    latencies,
    rss,
    receipts: total,
    lost,
    bound: workers * (o.maxMemoryBytes ?? DEFAULT_MEMORY) + primary,
  };
}

/** Levels off: the mean of the last third of the samples is < 10 % above the middle third's. */
function levelsOff(rss: readonly number[]): boolean {
  const third = Math.floor(rss.length / 3);
  if (third < 1) return false;
  const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
  return mean(rss.slice(-third)) < 1.1 * mean(rss.slice(third, 2 * third));
}

export async function main(argv: string[]): Promise<void> {
  const o = parseArgs(argv);
  const receipts = new Map<string, Set<string>>();
  const upstream = await startUpstream(receipts);
  const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  const direct = await directP50(upstreamUrl, o.turns);
  console.log(
    `${o.clients} clients × ${o.durationS} s, conversations of up to ${o.turns} turns with 6–40 kB tool outputs; direct upstream p50 ${direct.toFixed(1)} ms`,
  );
  const results: RunResult[] = [];
  for (const workers of o.workers) {
    const r = await run(o, workers, upstreamUrl, receipts);
    results.push(r);
    console.log(`workers ${workers}: RSS every 5 s (MiB, all processes): ${r.rss.map(mb).join(' ')}`);
  }
  upstream.close();
  printTable([
    [
      'workers',
      'answers',
      'errors',
      'answers/s',
      'added p50 ms',
      'added p95 ms',
      'receipts',
      'lost',
      'RSS max MiB',
      'bound MiB',
      'levels off under bound',
    ],
    ...results.map((r) => [
      String(r.workers),
      String(r.answers),
      String(r.errors),
      (r.answers / o.durationS).toFixed(1),
      (pct(r.latencies, 50) - direct).toFixed(1),
      (pct(r.latencies, 95) - direct).toFixed(1),
      String(r.receipts),
      String(r.lost),
      mb(Math.max(...r.rss)),
      mb(r.bound),
      levelsOff(r.rss) && Math.max(...r.rss) < r.bound ? 'yes' : 'no',
    ]),
  ]);
  const one = results.find((r) => r.workers === 1);
  const two = results.find((r) => r.workers === 2);
  if (one !== undefined && two !== undefined)
    console.log(
      `2 workers / 1 worker answers: ${(two.answers / Math.max(1, one.answers)).toFixed(2)} × (${two.answers >= 1.4 * one.answers ? 'meets' : 'misses'} the 1.4 × target)`,
    );
}
