/**
 * `npm run bench -- proxy [requests-per-level] [--session-turns 200]`: what the gateway adds to a call.
 *
 * The proxy runs as the real CLI in a child process (as it would be deployed); a loopback
 * upstream and the load generator share this process. Every measurement is taken twice in the
 * same run, against the upstream directly and through the proxy, with the same bodies:
 * - added latency, p50 and p99 of (request sent → whole answer read), at 1, 16 and 64 concurrent
 *   clients, with the sample session's requests of 50–200 kB. Each client is its own session and
 *   warms its requests once first, so the measured requests hit cached reductions;
 * - time to first byte of a streamed answer, direct vs through the proxy.
 * A second proxy in mode `off` (every stage passes through) runs in the same loop: what the gateway
 * itself adds (body parsing, session, forwarding) apart from the request stages' own time.
 * A third child, the floor (bench/_floor-proxy.ts), does only what any gateway that looks into
 * bodies must: read, JSON.parse, JSON.stringify, forward with undici, relay. Its added latency is
 * what this machine charges for one more process hop with a parse and a serialization, whatever
 * the gateway does on top.
 * Then one conversation growing to `--session-turns` turns through a proxy and through one with the
 * body memo off (see growingSession): what a long session costs per request, and what the memo saves.
 * Targets (issue #18): added p50 ≤ 2 ms on cached reductions, first byte ≤ 5 ms later than direct.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { CHAT_ANSWER, sampleBodies } from './_support.js';
import { transcript } from './compile.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const LEVELS = [1, 16, 64];

function startUpstream(): Promise<Server> {
  const chunk = (delta: object, finish: string | null = null): string =>
    `data: ${JSON.stringify({ id: 's', object: 'chat.completion.chunk', created: 0, model: 'm', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  const server = createServer({ noDelay: true }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const streamed = Buffer.concat(chunks).includes('"stream":true');
      if (!streamed) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(CHAT_ANSWER);
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(chunk({ role: 'assistant', content: 'first' }));
      setTimeout(() => {
        res.write(chunk({ content: ' rest' }));
        res.end(`${chunk({}, 'stop')}data: [DONE]\n\n`);
      }, 5);
    });
  });
  server.keepAliveTimeout = 65_000;
  return new Promise((ok) => server.listen(0, '127.0.0.1', () => ok(server)));
}

async function startProxy(
  upstream: string,
  db: string,
  env: Record<string, string> = {},
  floor = false,
): Promise<{ url: string; child: ChildProcess }> {
  const args = floor
    ? ['bench/_floor-proxy.ts', upstream]
    : [
        'src/cli/main.ts',
        'proxy',
        '--port',
        '0',
        // One process, as in the earlier runs these figures are compared with (proxy-load compares workers).
        '--workers',
        '1',
        '--upstream',
        upstream,
        '--db',
        db,
        ...(process.env['TT_BENCH_DEBUG'] !== undefined ? [] : ['--quiet']),
      ];
  const child = spawn(process.execPath, ['--import', 'tsx', ...args], {
    cwd: ROOT,
    env: { PATH: process.env['PATH'] ?? '', HOME: dirname(db), ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const url = await new Promise<string>((ok, fail) => {
    let err = '';
    child.stderr!.on('data', (c: Buffer) => {
      err += c.toString();
      if (process.env['TT_BENCH_DEBUG'] !== undefined) process.stderr.write(c);
      const m = /listening on (http:\/\/[\d.]+:\d+)/.exec(err);
      if (m !== null) ok(m[1]!);
    });
    child.once('exit', (code) => fail(new Error(`proxy exited ${code}: ${err}`)));
  });
  return { url, child };
}

/** CPU time (user + system, ms) the proxy process has used so far: load-independent cost. */
function cpuMs(pid: number | undefined): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return Number.NaN;
  }
}

const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

/** One chat request of `session` with `body`. */
const post = (pool: Pool, body: string, session: string) =>
  pool.request({
    path: '/v1/chat/completions',
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      authorization: 'Bearer sk-bench',
      'x-token-terminator-session': session,
    },
    body,
  });

async function call(pool: Pool, body: string, session: string): Promise<number> {
  const started = performance.now();
  const res = await post(pool, body, session);
  await res.body.arrayBuffer();
  if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
  return performance.now() - started;
}

async function firstByte(pool: Pool, body: string, session: string): Promise<number> {
  const started = performance.now();
  const res = await post(pool, body, session);
  let first = Number.NaN;
  for await (const _chunk of res.body) {
    if (Number.isNaN(first)) first = performance.now() - started;
  }
  return first;
}

/** `clients` concurrent loops, each sending `perClient` requests; returns every latency. */
async function load(pool: Pool, bodies: string[], clients: number, perClient: number, tag: string): Promise<number[]> {
  const times: number[] = [];
  await Promise.all(
    Array.from({ length: clients }, async (_, c) => {
      for (let i = 0; i < perClient; i++) times.push(await call(pool, bodies[(c + i) % bodies.length]!, `${tag}-${c}`));
    }),
  );
  return times;
}

/**
 * One conversation growing turn by turn (the compile bench's transcript, a tool output per turn,
 * 2 MB of history at turn 200), sent to the upstream directly, through a proxy and through a proxy
 * with the body memo off (`--body-memo-bytes 0`: every body parsed whole), request by request in
 * turn so all three see the same load. Added latency and proxy CPU per request, around turn 20 and
 * around the last turn.
 */
async function growingSession(upstreamUrl: string, dir: string, turns: number, direct: Pool): Promise<void> {
  const on = await startProxy(upstreamUrl, join(dir, 'memo-on', 'vault.sqlite3'));
  const off = await startProxy(upstreamUrl, join(dir, 'memo-off', 'vault.sqlite3'), {
    TOKEN_TERMINATOR_PROXY_BODY_MEMO_BYTES: '0',
  });
  const pools = { on: new Pool(on.url, { connections: 4 }), off: new Pool(off.url, { connections: 4 }) };
  try {
    const texts = transcript(turns, ' (proxy bench)').map((m) => JSON.stringify(m));
    const t = { direct: [] as number[], on: [] as number[], off: [] as number[] };
    const cpu = { on: [] as number[], off: [] as number[] };
    for (let turn = 1; turn <= turns; turn++) {
      const body = `{"model":"gpt-4o","messages":[${texts.slice(0, 2 + 2 * turn).join(',')}]}`;
      t.direct.push(await call(direct, body, 'grow'));
      for (const k of ['on', 'off'] as const) {
        const pid = (k === 'on' ? on : off).child.pid;
        const before = cpuMs(pid);
        t[k].push(await call(pools[k], body, 'grow'));
        cpu[k].push(cpuMs(pid) - before);
      }
    }
    const window = (xs: number[], turn: number): number[] => xs.slice(Math.max(0, turn - 10), turn);
    const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
    console.log(
      `\none conversation of ${turns} turns (${(texts.slice(0, 2 + 2 * turns).join(',').length / 1e6).toFixed(2)} MB of history at the end), median of the 10 requests ending at each turn:`,
    );
    console.log('  turn | added p50 ms, memo on / off | proxy CPU ms/request, memo on / off');
    for (const turn of [Math.min(20, turns), turns]) {
      const d = pct(window(t.direct, turn), 50);
      console.log(
        `  ${String(turn).padStart(4)} | ${(pct(window(t.on, turn), 50) - d).toFixed(2)} / ${(pct(window(t.off, turn), 50) - d).toFixed(2)} | ${mean(window(cpu.on, turn)).toFixed(1)} / ${mean(window(cpu.off, turn)).toFixed(1)}`,
      );
    }
  } finally {
    await pools.on.close();
    await pools.off.close();
    for (const p of [on, off]) {
      p.child.kill('SIGTERM');
      await new Promise((ok) => p.child.once('exit', ok));
    }
  }
}

export async function main(argv: string[]): Promise<void> {
  const total = argv[0] !== undefined && !argv[0].startsWith('--') ? Number(argv[0]) : 384;
  const at = argv.indexOf('--session-turns');
  const sessionTurns = at >= 0 ? Number(argv[at + 1]) : 200;
  const bodies = sampleBodies();
  const dir = mkdtempSync(join(tmpdir(), 'tt-bench-proxy-'));
  const upstream = await startUpstream();
  const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  const proxy = await startProxy(upstreamUrl, join(dir, 'vault.sqlite3'));
  const off = await startProxy(upstreamUrl, join(dir, 'off', 'vault.sqlite3'), { TOKEN_TERMINATOR_MODE: 'off' });
  const floor = await startProxy(upstreamUrl, '', {}, true);
  const pools = {
    direct: new Pool(upstreamUrl, { connections: 64 }),
    proxy: new Pool(proxy.url, { connections: 64 }),
    off: new Pool(off.url, { connections: 64 }),
    floor: new Pool(floor.url, { connections: 64 }),
  };
  try {
    console.log(
      `requests: ${bodies.length} distinct bodies of ${Math.min(...bodies.map((b) => b.length))}–${Math.max(...bodies.map((b) => b.length))} bytes (examples/sessions/sample.jsonl)`,
    );
    console.log(
      `load average ${loadavg()
        .map((l) => l.toFixed(1))
        .join(
          ' ',
        )} on ${availableParallelism()} cores (latencies include waiting for a core; CPU per request does not)`,
    );
    console.log(
      'clients | direct p50 / p99 ms | proxy p50 / p99 ms | added p50 / p99 ms | proxy CPU ms/request | mode off: added p50 / p99 ms, CPU ms/request | floor: added p50 / p99 ms, CPU ms/request',
    );
    const rows: { clients: number; added50: number; added99: number; off50: number; floor50: number }[] = [];
    for (const clients of LEVELS) {
      const perClient = Math.max(2, Math.ceil(total / clients));
      // Warm: every client session sees each of its bodies once (first sight: reductions computed and stored).
      for (const [pool, tag] of [
        [pools.proxy, 'c'],
        [pools.off, 'o'],
      ] as const) {
        await Promise.all(
          Array.from({ length: clients }, async (_, c) => {
            for (let i = 0; i < Math.min(perClient, bodies.length); i++)
              await call(pool, bodies[(c + i) % bodies.length]!, `${tag}${clients}-${c}`);
          }),
        );
      }
      await load(pools.direct, bodies, clients, 2, 'warm');
      await load(pools.floor, bodies, clients, 2, 'warm');
      // Alternate direct, proxy and mode off in halves so all three see the same machine load.
      const direct: number[] = [];
      const through: number[] = [];
      const bare: number[] = [];
      const least: number[] = [];
      let cpu = 0;
      let cpuOff = 0;
      let cpuFloor = 0;
      for (let half = 0; half < 2; half++) {
        direct.push(...(await load(pools.direct, bodies, clients, Math.ceil(perClient / 2), 'direct')));
        let before = cpuMs(proxy.child.pid);
        through.push(...(await load(pools.proxy, bodies, clients, Math.ceil(perClient / 2), `c${clients}`)));
        cpu += cpuMs(proxy.child.pid) - before;
        before = cpuMs(off.child.pid);
        bare.push(...(await load(pools.off, bodies, clients, Math.ceil(perClient / 2), `o${clients}`)));
        cpuOff += cpuMs(off.child.pid) - before;
        before = cpuMs(floor.child.pid);
        least.push(...(await load(pools.floor, bodies, clients, Math.ceil(perClient / 2), 'floor')));
        cpuFloor += cpuMs(floor.child.pid) - before;
      }
      const row = {
        clients,
        added50: pct(through, 50) - pct(direct, 50),
        added99: pct(through, 99) - pct(direct, 99),
        off50: pct(bare, 50) - pct(direct, 50),
        floor50: pct(least, 50) - pct(direct, 50),
      };
      rows.push(row);
      console.log(
        `${String(clients).padStart(7)} | ${pct(direct, 50).toFixed(2)} / ${pct(direct, 99).toFixed(2)} | ${pct(through, 50).toFixed(2)} / ${pct(through, 99).toFixed(2)} | ${row.added50.toFixed(2)} / ${row.added99.toFixed(2)} | ${(cpu / through.length).toFixed(2)} | ${row.off50.toFixed(2)} / ${(pct(bare, 99) - pct(direct, 99)).toFixed(2)}, ${(cpuOff / bare.length).toFixed(2)} | ${row.floor50.toFixed(2)} / ${(pct(least, 99) - pct(direct, 99)).toFixed(2)}, ${(cpuFloor / least.length).toFixed(2)}`,
      );
    }
    const streamBody = JSON.stringify({ ...(JSON.parse(bodies[0]!) as object), stream: true });
    await firstByte(pools.proxy, streamBody, 'ttfb');
    await firstByte(pools.off, streamBody, 'ttfb');
    await firstByte(pools.floor, streamBody, 'ttfb');
    const ttfb = { direct: [] as number[], proxy: [] as number[], off: [] as number[], floor: [] as number[] };
    for (let i = 0; i < 40; i++) {
      ttfb.direct.push(await firstByte(pools.direct, streamBody, 'ttfb'));
      ttfb.proxy.push(await firstByte(pools.proxy, streamBody, 'ttfb'));
      ttfb.off.push(await firstByte(pools.off, streamBody, 'ttfb'));
      ttfb.floor.push(await firstByte(pools.floor, streamBody, 'ttfb'));
    }
    const later = pct(ttfb.proxy, 50) - pct(ttfb.direct, 50);
    console.log(
      `streamed first byte p50: direct ${pct(ttfb.direct, 50).toFixed(2)} ms, proxy ${pct(ttfb.proxy, 50).toFixed(2)} ms, later by ${later.toFixed(2)} ms (target ≤ 5); mode off ${pct(ttfb.off, 50).toFixed(2)} ms, later by ${(pct(ttfb.off, 50) - pct(ttfb.direct, 50)).toFixed(2)} ms; floor later by ${(pct(ttfb.floor, 50) - pct(ttfb.direct, 50)).toFixed(2)} ms`,
    );
    const single = rows[0]!;
    console.log(
      `added p50 at 1 client: ${single.added50.toFixed(2)} ms (target ≤ 2 on cached reductions); mode off ${single.off50.toFixed(2)} ms; floor (parse + stringify + one more hop) ${single.floor50.toFixed(2)} ms`,
    );
    if (sessionTurns > 0) await growingSession(upstreamUrl, dir, sessionTurns, pools.direct);
  } finally {
    await pools.direct.close();
    await pools.proxy.close();
    await pools.off.close();
    await pools.floor.close();
    for (const p of [proxy, off, floor]) {
      p.child.kill('SIGTERM');
      await new Promise((ok) => p.child.once('exit', ok));
    }
    upstream.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
