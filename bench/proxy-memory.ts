/**
 * `npm run bench -- proxy-memory [--workers 2] [--big 8] [--max-memory-bytes n]`: issue 49's large
 * requests against the real gateway (`token-terminator proxy --workers 2`, default settings, a fresh
 * SQLite vault, a loopback upstream here). One request of 15 terminal outputs of 1.9 MB (≈ 30 MB,
 * under the 32 MiB body limit and each output under the artifact ceiling), then `--big` of them at
 * once, each on its own connection, while a good client (a small conversation, one request at a
 * time) keeps asking. Prints, per phase: what each large request got (reduced: the upstream received
 * fewer bytes than were sent; passed through: the same bytes; or the status and reason the proxy
 * answered), the good client's answers and failures, its p50 / p95 latency and the p95 added to its
 * latency alone (measured first, in the same run), workers that died, and the resident size of all
 * the gateway's processes (sampled every 100 ms) against `--max-memory-bytes` as the CLI resolves it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from 'undici';
import { UNREDUCED_HEADER } from '../adapters/proxy/api.js';
import { loadProxyConfig } from '../src/config/proxy.js';
import { bigRequest } from '../test/support/big-request.js';
import { CHAT_ANSWER, printTable, rssOf, tree } from './_support.js';
import { Agent } from './proxy-load.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const RECEIVED = 'x-probe-received';

/** A loopback upstream answering every request with CHAT_ANSWER and the body bytes it received. */
async function upstream(): Promise<{ url: string; close: () => void }> {
  const server = createServer({ noDelay: true }, (req, res) => {
    let n = 0;
    req.on('data', (c: Buffer) => (n += c.length));
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json', [RECEIVED]: String(n) });
      res.end(CHAT_ANSWER);
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => server.close() };
}

interface Gateway {
  readonly url: string;
  readonly child: ChildProcess;
  stderr(): string;
}

async function startGateway(upstreamUrl: string, dir: string, flags: readonly string[]): Promise<Gateway> {
  const args = ['--import', 'tsx', 'src/cli/main.ts', 'proxy', '--port', '0', '--upstream', upstreamUrl];
  args.push('--db', join(dir, 'vault.sqlite3'), '--quiet', ...flags);
  const nodeArgs = (process.env['TT_BENCH_NODE_ARGS'] ?? '').split(/\s+/).filter((a) => a !== '');
  const child = spawn(process.execPath, [...nodeArgs, ...args], {
    cwd: ROOT,
    env: { PATH: process.env['PATH'] ?? '', HOME: dir },
    detached: true,
    stdio: ['ignore', process.env['TT_BENCH_NODE_ARGS'] === undefined ? 'ignore' : 'inherit', 'pipe'],
  });
  let err = '';
  const url = await new Promise<string>((ok, fail) => {
    child.stderr!.on('data', (c: Buffer) => {
      err += c.toString();
      const m = /listening on (http:\/\/[\d.]+:\d+)/.exec(err);
      if (m !== null) ok(m[1]!);
    });
    child.once('exit', (code) => fail(new Error(`proxy exited ${code}: ${err}`)));
  });
  return { url, child, stderr: () => err };
}

/** What one large request got. */
async function sendBig(url: string, body: Buffer): Promise<string> {
  const client = new Client(url, { headersTimeout: 0, bodyTimeout: 0 });
  try {
    const res = await client.request({
      path: '/v1/chat/completions',
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-big' },
      body,
    });
    const text = await res.body.text();
    if (res.statusCode === 200) {
      const received = Number(res.headers[RECEIVED]);
      const why = res.headers[UNREDUCED_HEADER];
      if (received < body.length) return 'reduced';
      return received === body.length ? `passed through${why === undefined ? '' : ` (${String(why)})`}` : 'grew';
    }
    let reason = '';
    try {
      const e = (JSON.parse(text) as { error?: { code?: string; type?: string } }).error;
      reason = e?.code ?? e?.type ?? '';
    } catch {
      reason = 'not JSON';
    }
    return `${res.statusCode} ${reason}${res.headers['retry-after'] === undefined ? '' : ' retry-after'}`;
  } catch (error) {
    return `failed (${(error as Error).message})`;
  } finally {
    await client.close().catch(() => undefined);
  }
}

interface Good {
  readonly ms: number[];
  failures: number;
  /** What the failures were (status or error), for the report. */
  readonly why: string[];
}

/** The good client: one small conversation, one request at a time, until `until()` is false. */
async function goodClient(url: string, agent: Agent, until: () => boolean, out: Good): Promise<void> {
  const client = new Client(url);
  while (until()) {
    const started = performance.now();
    try {
      const res = await client.request({
        path: '/v1/chat/completions',
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          authorization: 'Bearer sk-good',
          'x-token-terminator-session': agent.session,
        },
        body: agent.next(),
      });
      const text = await res.body.text();
      if (res.statusCode === 200) out.ms.push(performance.now() - started);
      else {
        out.failures++;
        out.why.push(`${res.statusCode} ${text.slice(0, 200)}`);
      }
    } catch (error) {
      out.failures++;
      out.why.push((error as Error).message);
    }
  }
  await client.close();
}

const pct = (xs: readonly number[], p: number): number => {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};
const mib = (b: number): string => (b / 2 ** 20).toFixed(0);

export async function main(argv: string[]): Promise<void> {
  const flag = (f: string): string | undefined => (argv.includes(f) ? argv[argv.indexOf(f) + 1] : undefined);
  const workers = flag('--workers') ?? '2';
  const bigAtOnce = Number(flag('--big') ?? 8);
  const memory = flag('--max-memory-bytes');
  const flags = ['--workers', workers, ...(memory === undefined ? [] : ['--max-memory-bytes', memory])];
  const cap = loadProxyConfig({
    env: {},
    flags: { workers, ...(memory === undefined ? {} : { maxMemoryBytes: memory }) },
  }).maxMemoryBytes;
  const up = await upstream();
  const dir = mkdtempSync(join(tmpdir(), 'tt-bench-proxy-memory-'));
  const g = await startGateway(up.url, dir, flags);
  let peak = 0;
  const sampler = setInterval(() => {
    peak = Math.max(
      peak,
      tree(g.child.pid!).reduce((n, p) => n + rssOf(p), 0),
    );
  }, 100);
  const rows = [
    [
      'phase',
      'large requests',
      'good answers',
      'good failures',
      'p50 ms',
      'p95 ms',
      'p95 added ms',
      'deaths',
      'RSS peak MiB',
    ],
  ];
  const deaths = (): number => (g.stderr().match(/"event":"worker_exit"/g) ?? []).length;
  try {
    const agent = new Agent('good', 40);
    // Alone first: the good client's own latency, and every worker warm.
    const alone: Good = { ms: [], failures: 0, why: [] };
    const aloneUntil = Date.now() + 10_000;
    await goodClient(g.url, agent, () => Date.now() < aloneUntil, alone);
    const base95 = pct(alone.ms, 95);
    rows.push([
      'good client alone',
      '-',
      String(alone.ms.length),
      String(alone.failures),
      pct(alone.ms, 50).toFixed(0),
      base95.toFixed(0),
      '-',
      String(deaths()),
      mib(peak),
    ]);
    for (const [label, n] of [
      ['1 large request', 1],
      [`${bigAtOnce} large at once`, bigAtOnce],
    ] as const) {
      if (n === 0) continue;
      const bodies = Array.from({ length: n }, (_, i) =>
        bigRequest(`${label.replace(/\W+/g, '-')}-${i}`, Number(flag('--outputs') ?? 15)),
      );
      const good: Good = { ms: [], failures: 0, why: [] };
      const before = deaths();
      peak = 0;
      let running = true;
      const goodRun = goodClient(g.url, agent, () => running, good);
      const t0 = performance.now();
      const answers = await Promise.all(bodies.map((b) => sendBig(g.url, b)));
      console.log(`${label}: all answered in ${(performance.now() - t0).toFixed(0)} ms`);
      running = false;
      await goodRun;
      for (const w of good.why) console.log(`${label}: the good client got ${w}`);
      const kinds = new Map<string, number>();
      for (const a of answers) kinds.set(a, (kinds.get(a) ?? 0) + 1);
      rows.push([
        label,
        [...kinds].map(([k, c]) => `${c} ${k}`).join(', '),
        String(good.ms.length),
        String(good.failures),
        pct(good.ms, 50).toFixed(0),
        pct(good.ms, 95).toFixed(0),
        (pct(good.ms, 95) - base95).toFixed(0),
        String(deaths() - before),
        mib(peak),
      ]);
    }
    printTable(rows, [0, 1]);
    console.log(`RSS bound (--max-memory-bytes as the CLI resolves it for ${workers} workers): ${mib(cap)} MiB`);
    if (deaths() > 0) console.log(g.stderr().slice(-4000));
  } finally {
    clearInterval(sampler);
    process.kill(-g.child.pid!, 'SIGTERM');
    up.close();
    await new Promise((r) => setTimeout(r, 500));
    rmSync(dir, { recursive: true, force: true });
  }
}
