/**
 * What a client can hold of the gateway (issue 32): a request that does not arrive whole within the
 * request timeout, or whose body arrives below the rate floor, is answered 408 and its connection
 * closed while well-behaved clients keep being answered; past the in-flight limit a request is
 * answered 503 with Retry-After at once; above the memory bound the caches are emptied and the
 * limit is lowered. Real sockets on 127.0.0.1, a real proxy and vault, a scripted upstream.
 */
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { loadProxyConfig, PRIMARY_MEMORY_BYTES, processShare } from '../../src/config/proxy.js';
import { ConfigError } from '../../src/errors.js';
import { startHarness, type Harness } from '../proxy/support/harness.js';
import { chat } from '../proxy/support/upstream.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const body = (text: string): string => JSON.stringify({ model: 'm', messages: [{ role: 'user', content: text }] });

async function ask(url: string, text: string, path = '/v1/chat/completions'): Promise<Response> {
  return fetch(`${url}${path}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      authorization: 'Bearer sk-bounds',
      ...(path === '/v1/messages' ? { 'anthropic-version': '2023-06-01' } : {}),
    },
    body: body(text),
  });
}

/** A raw client that sends the head of a chunked POST, then one body byte every `everyMs` until closed. */
interface Trickler {
  readonly socket: Socket;
  /** Everything the server wrote back. */
  received(): string;
  /** Resolves when the server closed the connection (we never close it ourselves). */
  readonly closed: Promise<void>;
  readonly open: () => boolean;
}

function trickle(url: string, everyMs: number): Promise<Trickler> {
  const { port } = new URL(url);
  return new Promise((ready, fail) => {
    const socket = connect(Number(port), '127.0.0.1');
    let text = '';
    let open = true;
    let timer: NodeJS.Timeout | undefined;
    const closed = new Promise<void>((done) =>
      socket.once('close', () => {
        open = false;
        clearInterval(timer);
        done();
      }),
    );
    socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
    socket.on('error', () => undefined);
    socket.once('connect', () => {
      socket.write(
        'POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n',
        () => {
          timer = setInterval(() => {
            if (!socket.destroyed) socket.write('1\r\n \r\n');
          }, everyMs);
          ready({ socket, received: () => text, closed, open: () => open });
        },
      );
    });
    socket.once('error', fail);
  });
}

/** A metric's value from the proxy's /metrics text (0 when absent). */
async function metric(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? 0 : Number(line.slice(name.length + 1));
}

describe('proxy bounds: slow requests', () => {
  it('answers 408 and closes 200 connections trickling a body past the request timeout, while a well-behaved client keeps getting answers', async () => {
    h = await startHarness((_r, i) => chat.text(`answer ${i}`), {
      // The rate floor is off: only the whole-request timeout can close them. The timeout is long
      // enough that the well-behaved client's own requests (a small body sent at once) finish well
      // within it even when a loaded machine stalls the event loop for a second or two.
      flags: { requestTimeoutMs: 5000, minBodyRate: 0 },
    });
    const url = h.url;
    expect((await ask(url, 'warm up')).status).toBe(200);
    const slow = await Promise.all(Array.from({ length: 200 }, () => trickle(url, 1000)));
    const answers: number[] = [];
    let answeredWhileHeld = 0;
    const allClosed = Promise.all(slow.map((s) => s.closed));
    let done = false;
    void allClosed.then(() => (done = true));
    // The well-behaved client keeps asking until every slow connection is gone, and once more after.
    while (!done) {
      const reply = await ask(url, `question ${answers.length}`);
      answers.push(reply.status);
      await reply.text();
      if (slow.some((s) => s.open())) answeredWhileHeld++;
    }
    const after = await ask(url, 'after');
    answers.push(after.status);
    expect(await after.json()).toMatchObject({ choices: [{ message: { content: expect.stringMatching(/^answer/) } }] });
    await allClosed;
    // Every slow connection was closed by the server with its 408, and none reached the upstream.
    for (const s of slow) expect(s.received()).toMatch(/^HTTP\/1\.1 408 /);
    expect(answers.filter((status) => status !== 200)).toEqual([]);
    expect(answeredWhileHeld).toBeGreaterThan(0);
    expect(h.upstream.requests).toHaveLength(answers.length + 1);
  }, 120_000);

  it('closes a connection whose body arrives below the rate floor, long before the request timeout, and serves a fast one', async () => {
    h = await startHarness((_r, i) => chat.text(`answer ${i}`), {
      flags: { requestTimeoutMs: 600_000, minBodyRate: 1000 },
      proxy: { bodyRateWindowMs: 300 },
    });
    const url = h.url;
    // 20 bytes a second against a floor of 1000.
    const slow = await trickle(url, 50);
    // A 300 kB body sent at once: far above the floor.
    const big = await ask(url, 'x'.repeat(300_000));
    expect(big.status).toBe(200);
    await slow.closed;
    expect(slow.received()).toMatch(/^HTTP\/1\.1 408 /);
    expect(await metric(url, 'token_terminator_proxy_connections_closed_total{reason="slow_body"}')).toBe(1);
  }, 60_000);
});

/** An upstream that holds every answer until released. */
async function heldUpstream(): Promise<{
  url: string;
  held: () => number;
  arrived: (n: number) => Promise<void>;
  release: () => void;
  close: () => Promise<void>;
}> {
  const waiting: ServerResponse[] = [];
  const watchers: { n: number; done: () => void }[] = [];
  let released = false;
  const answer = (res: ServerResponse): void => {
    const text = JSON.stringify((chat.text('held answer') as { json: unknown }).json);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(text);
  };
  const server = createServer((req: IncomingMessage, res) => {
    req.resume();
    req.on('end', () => {
      if (released) return answer(res);
      waiting.push(res);
      for (const w of watchers.splice(0))
        if (waiting.length >= w.n) w.done();
        else watchers.push(w);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    held: () => waiting.length,
    arrived: (n) => new Promise<void>((done) => (waiting.length >= n ? done() : watchers.push({ n, done }))),
    release: () => {
      released = true;
      for (const res of waiting.splice(0)) answer(res);
    },
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}

describe('proxy bounds: requests in flight', () => {
  it('answers 503 with Retry-After beyond the in-flight limit, at once, and serves again once a slot is free', async () => {
    const upstream = await heldUpstream();
    try {
      h = await startHarness(() => chat.text('unused'), {
        flags: { upstream: upstream.url, anthropicUpstream: upstream.url, maxInFlight: 3 },
      });
      const url = h.url;
      const first = [ask(url, 'one'), ask(url, 'two'), ask(url, 'three')];
      await upstream.arrived(3);
      const refused = await ask(url, 'four');
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toBe('1');
      expect(await refused.json()).toMatchObject({ error: { code: 'proxy_overloaded' } });
      const anthropic = await ask(url, 'five', '/v1/messages');
      expect(anthropic.status).toBe(503);
      expect(await anthropic.json()).toMatchObject({ type: 'error', error: { type: 'overloaded_error' } });
      // Health and metrics still answer; nothing refused reached the upstream.
      expect((await fetch(`${url}/healthz`)).status).toBe(200);
      expect(await metric(url, 'token_terminator_proxy_rejected_total{reason="in_flight"}')).toBe(2);
      expect(await metric(url, 'token_terminator_proxy_in_flight')).toBe(3);
      expect(upstream.held()).toBe(3);
      upstream.release();
      for (const reply of await Promise.all(first)) expect(reply.status).toBe(200);
      const again = await ask(url, 'six');
      expect(again.status).toBe(200);
      expect(await again.json()).toMatchObject({ choices: [{ message: { content: 'held answer' } }] });
    } finally {
      await h?.close();
      h = undefined;
      await upstream.close();
    }
  }, 60_000);

  // The resident size against the memory bound, and the V8 heap against its limit (a heap that
  // fills its limit ends the process while the resident size is still under the bound).
  const CAP = 256 * 2 ** 20;
  const HEAP_LIMIT = 200 * 2 ** 20;
  const sources = [
    { source: 'the resident size', gauge: 'resident_bytes', under: 100 * 2 ** 20, trims: 0.9 * CAP + 1, over: CAP + 1 },
    {
      source: 'the V8 heap',
      gauge: 'heap_used_bytes',
      under: 0.5 * HEAP_LIMIT,
      trims: 0.85 * HEAP_LIMIT + 1,
      over: 0.95 * HEAP_LIMIT + 1,
    },
  ] as const;

  /** A proxy whose sampled sizes the test sets: `sampled(v)` sets `gauge`'s source to v and waits for /metrics to show it. */
  async function sizedProxy(upstream: string, maxInFlight: number, gauge: (typeof sources)[number]['gauge']) {
    const sizes = { rss: 100 * 2 ** 20, heap: 0.5 * HEAP_LIMIT };
    const key = gauge === 'resident_bytes' ? 'rss' : 'heap';
    h = await startHarness(() => chat.text('unused'), {
      flags: { upstream, maxInFlight, maxMemoryBytes: CAP, workers: 1 },
      proxy: { rss: () => sizes.rss, heap: () => ({ used: sizes.heap, limit: HEAP_LIMIT }), memoryCheckMs: 20 },
    });
    const url = h.url;
    const sampled = async (value: number): Promise<void> => {
      sizes[key] = value;
      while ((await metric(url, `token_terminator_proxy_${gauge}`)) !== value)
        await new Promise((r) => setTimeout(r, 20));
    };
    return { url, sampled };
  }

  it.each(sources)(
    'empties the caches when $source nears its bound, still serving the whole limit',
    async ({ gauge, under, trims }) => {
      const upstream = await heldUpstream();
      try {
        const { url, sampled } = await sizedProxy(upstream.url, 2, gauge);
        await sampled(under);
        expect(await metric(url, 'token_terminator_proxy_memory_trims_total')).toBe(0);
        await sampled(trims);
        expect(await metric(url, 'token_terminator_proxy_memory_trims_total')).toBeGreaterThan(0);
        // Still the whole limit (2): only beyond the bound does the process serve fewer.
        const held = [ask(url, 'one'), ask(url, 'two')];
        await upstream.arrived(2);
        upstream.release();
        for (const reply of await Promise.all(held)) expect(reply.status).toBe(200);
      } finally {
        await h?.close();
        h = undefined;
        await upstream.close();
      }
    },
    60_000,
  );

  it.each(sources)(
    'above the bound of $source serves an eighth of the limit at once (503 beyond), and the full limit once under it again',
    async ({ gauge, under, over }) => {
      const upstream = await heldUpstream();
      try {
        const { url, sampled } = await sizedProxy(upstream.url, 16, gauge);
        await sampled(over);
        expect(await metric(url, 'token_terminator_proxy_memory_trims_total')).toBeGreaterThan(0);
        const held = [ask(url, 'one'), ask(url, 'two')];
        await upstream.arrived(2);
        const refused = await ask(url, 'three');
        expect(refused.status).toBe(503);
        expect(refused.headers.get('retry-after')).toBe('1');
        expect(await metric(url, 'token_terminator_proxy_rejected_total{reason="memory"}')).toBe(1);
        await sampled(under);
        const third = ask(url, 'three again');
        await upstream.arrived(3);
        upstream.release();
        for (const reply of await Promise.all([...held, third])) expect(reply.status).toBe(200);
      } finally {
        await h?.close();
        h = undefined;
        await upstream.close();
      }
    },
    60_000,
  );
});

describe('proxy bounds: settings', () => {
  it('holds per-session request state under a sixteenth of its memory bound, estimated in bytes, and shows it in /metrics', async () => {
    const cap = 512 * 2 ** 20;
    h = await startHarness(() => chat.text('ok'), { flags: { maxMemoryBytes: cap, workers: 1 } });
    for (const text of ['first session', 'second session', 'third session'])
      expect((await ask(h.url, text)).status).toBe(200);
    expect(await metric(h.url, 'token_terminator_proxy_sessions_held')).toBe(3);
    // Accounted only under a bound (0 without one): the proxy sets it, in bytes, from its share.
    const bytes = await metric(h.url, 'token_terminator_proxy_session_state_bytes');
    expect(bytes).toBeGreaterThan(3 * body('first session').length);
    expect(bytes).toBeLessThanOrEqual(cap / 16);
  });

  it('has documented defaults, sizes the body memo from the memory bound, and names the flag of a bad value', () => {
    const d = loadProxyConfig({ env: {}, flags: { workers: 1 } });
    expect(d).toMatchObject({
      requestTimeoutMs: 120_000,
      minBodyRate: 1024,
      maxInFlight: 256,
      maxMemoryBytes: 1_073_741_824,
      bodyMemoBytes: 67_108_864,
    });
    expect(loadProxyConfig({ env: {} }).workers).toBeGreaterThanOrEqual(1);
    const small = loadProxyConfig({
      env: { TOKEN_TERMINATOR_PROXY_MAX_MEMORY_BYTES: String(256 * 2 ** 20), TOKEN_TERMINATOR_PROXY_WORKERS: '1' },
    });
    expect(small.bodyMemoBytes).toBe(16 * 2 ** 20);
    expect(() => loadProxyConfig({ env: {}, flags: { maxMemoryBytes: 2 ** 27 } })).toThrow(
      '--max-memory-bytes must be an integer in 268435456…1099511627776, got 134217728',
    );
    expect(loadProxyConfig({ env: {}, flags: { workers: '3', requestTimeoutMs: 5000 } })).toMatchObject({
      workers: 3,
      requestTimeoutMs: 5000,
    });
    expect(() => loadProxyConfig({ env: {}, flags: { requestTimeoutMs: 10 } })).toThrow(
      '--request-timeout-ms must be an integer in 1000…3600000, got 10',
    );
    expect(() => loadProxyConfig({ env: { TOKEN_TERMINATOR_PROXY_MAX_IN_FLIGHT: '0' } })).toThrow(
      'TOKEN_TERMINATOR_PROXY_MAX_IN_FLIGHT must be an integer in 1…100000, got "0"',
    );
    expect(() => loadProxyConfig({ env: {}, flags: { workers: 0 } })).toThrow(ConfigError);
    expect(() =>
      loadProxyConfig({ env: {}, flags: { workers: 1, maxMemoryBytes: 256 * 2 ** 20, bodyMemoBytes: 200 * 2 ** 20 } }),
    ).toThrow(/more than half of --max-memory-bytes/);
  });
});

describe('proxy bounds: the memory bound is the whole gateway\u2019s', () => {
  const MiB = 2 ** 20;
  it('gives each worker an equal share of the total less the primary, and of the body memo', () => {
    const two = loadProxyConfig({ env: {}, flags: { workers: 2 } });
    expect(two.maxMemoryBytes).toBe(1024 * MiB);
    expect(processShare(two)).toMatchObject({ workers: 1, maxMemoryBytes: 448 * MiB, bodyMemoBytes: 32 * MiB });
    const one = loadProxyConfig({ env: {}, flags: { workers: 1, maxMemoryBytes: 512 * MiB } });
    expect(processShare(one)).toBe(one);
    const given = loadProxyConfig({ env: {}, flags: { workers: 3, maxMemoryBytes: 3 * 1024 * MiB } });
    const share = processShare(given);
    expect(PRIMARY_MEMORY_BYTES + 3 * share.maxMemoryBytes).toBeLessThanOrEqual(given.maxMemoryBytes);
    expect(share.maxMemoryBytes).toBe(Math.floor((3 * 1024 * MiB - PRIMARY_MEMORY_BYTES) / 3));
  });

  it('raises the default total for many workers (384 MiB each plus the primary) and refuses a total too small to share', () => {
    expect(loadProxyConfig({ env: {}, flags: { workers: 4 } }).maxMemoryBytes).toBe(128 * MiB + 4 * 384 * MiB);
    expect(() => loadProxyConfig({ env: {}, flags: { workers: 4, maxMemoryBytes: 1024 * MiB } })).toThrow(
      /--max-memory-bytes \(TOKEN_TERMINATOR_PROXY_MAX_MEMORY_BYTES\) 1073741824 is the whole gateway's: .* each of 4 workers under 268435456; raise it to at least 1207959552 or lower --workers/,
    );
  });
});

describe('the gateway\u2019s documentation (docs/gateway.md, linked from the README)', () => {
  it('documents every bound and its default as the code has them', () => {
    const section = readFileSync(new URL('../../docs/gateway.md', import.meta.url), 'utf8');
    const d = loadProxyConfig({ env: {}, flags: { workers: 1 } });
    for (const text of [
      `\`--request-timeout-ms\` (${d.requestTimeoutMs}`,
      `\`--min-body-rate\` bytes per second over each 10 s (${d.minBodyRate}`,
      `\`--max-in-flight\` requests at once (${d.maxInFlight})`,
      `\`--max-memory-bytes\` (${d.maxMemoryBytes / 2 ** 30} GiB)`,
      '`Retry-After: 1`',
      '`--workers N`',
      '`os.availableParallelism()`',
    ])
      expect(section, text).toContain(text);
  });
});
