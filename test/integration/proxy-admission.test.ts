/**
 * Admission of a request before it is read (issue 49): each API key's fair share of the in-flight
 * limit, and the claim a body makes on the reduction budget (a share of the V8 heap limit, several
 * heap bytes per body byte). A body that does not fit goes upstream as the client sent it, never
 * parsed, with `x-token-terminator-unreduced: memory`; a reduction running when the heap nears its
 * limit is aborted and its request forwarded as sent. Real sockets on 127.0.0.1, a real proxy and
 * vault, a scripted upstream; the heap is injected (`createProxy({ heap })`), nothing is timed.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { UNREDUCED_HEADER } from '../../adapters/proxy/api.js';
import { HEAP_ABORT_AT, HEAP_PER_BODY_BYTE, REDUCE_SHARE, SMALL_BODY } from '../../adapters/proxy/bounds.js';
import type { Terminator } from '../../src/runtime/types.js';
import { startHarness, testRunOutput, type Harness } from '../proxy/support/harness.js';
import { chat } from '../proxy/support/upstream.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

async function metric(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? 0 : Number(line.slice(name.length + 1));
}

/** An upstream that holds every answer until released. */
async function heldUpstream(): Promise<{
  url: string;
  arrived: (n: number) => Promise<void>;
  release: () => void;
  close: () => Promise<void>;
}> {
  const waiting: ServerResponse[] = [];
  const watchers: { n: number; done: () => void }[] = [];
  let released = false;
  const answer = (res: ServerResponse): void => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify((chat.text('held answer') as { json: unknown }).json));
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

const ask = (url: string, key: string, text: string): Promise<Response> =>
  fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: text }] }),
  });

describe('proxy admission: each API key its share of the in-flight limit', () => {
  it("keeps room for another key's requests while one key floods, and shrinks the flooding key to an equal share", async () => {
    const upstream = await heldUpstream();
    try {
      h = await startHarness(() => chat.text('unused'), { flags: { upstream: upstream.url, maxInFlight: 16 } });
      const url = h.url;
      // Alone, key A may hold the limit less an eighth: 14 of 16.
      const flood = Array.from({ length: 14 }, (_, i) => ask(url, 'sk-a', `a${i}`));
      await upstream.arrived(14);
      const over = await ask(url, 'sk-a', 'a14');
      expect(over.status).toBe(503);
      expect(over.headers.get('retry-after')).toBe('1');
      expect(((await over.json()) as { error: { message: string } }).error.message).toContain('share');
      // Key B is served beside the flood.
      const b = [ask(url, 'sk-b', 'b0')];
      await upstream.arrived(15);
      // With two keys in flight each may hold half (8): A, holding 14, gets nothing more, while B does.
      expect((await ask(url, 'sk-a', 'a15')).status).toBe(503);
      b.push(ask(url, 'sk-b', 'b1'));
      await upstream.arrived(16);
      expect(await metric(url, 'token_terminator_proxy_rejected_total{reason="tenant_share"}')).toBe(2);
      expect(await metric(url, 'token_terminator_proxy_rejected_total{reason="in_flight"}')).toBe(0);
      upstream.release();
      for (const reply of await Promise.all([...flood, ...b])) expect(reply.status).toBe(200);
      expect((await ask(url, 'sk-a', 'a16')).status).toBe(200);
    } finally {
      await h?.close();
      h = undefined;
      await upstream.close();
    }
  }, 60_000);
});

describe('proxy admission: memory per request', () => {
  /** A request with one terminal output of about `bytes` bytes (a compressible test run). */
  function bodyOf(bytes: number, seed: number): string {
    const lines = Math.ceil(bytes / 45);
    return JSON.stringify({
      model: 'gpt-4o',
      messages: [
        { role: 'user', content: 'Run the tests.' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'c1', type: 'function', function: { name: 'terminal', arguments: '{"command":"npm test"}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'c1', content: testRunOutput(lines, seed) },
      ],
    });
  }

  /** A proxy whose heap limit gives a reduction budget of `budget` bytes. */
  async function budgeted(budget: number): Promise<void> {
    const limit = Math.ceil(budget / REDUCE_SHARE);
    h = await startHarness((_r, i) => chat.text(`answer ${i}`), {
      proxy: { heap: () => ({ used: 0, limit }), memoryCheckMs: 10 },
    });
  }

  const send = (url: string, body: string, chunked: boolean): Promise<Response> =>
    fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-m' },
      // A stream has no Content-Length: the proxy claims its bytes as they arrive.
      body: chunked ? new Blob([body]).stream() : body,
      ...(chunked ? { duplex: 'half' } : {}),
    } as RequestInit);

  for (const chunked of [false, true])
    it(`forwards a body ${chunked ? 'of unknown length (chunked)' : 'of declared length'} that does not fit the reduction budget as sent, naming the reason; one that fits is reduced`, async () => {
      const large = bodyOf(3 * SMALL_BODY, 1);
      // The budget holds a body of 2 × SMALL_BODY, not this one of 3.
      await budgeted(2 * SMALL_BODY * HEAP_PER_BODY_BYTE);
      const url = h!.url;
      const refused = await send(url, large, chunked);
      expect(refused.status).toBe(200);
      expect(refused.headers.get(UNREDUCED_HEADER)).toBe('memory');
      expect(h!.upstream.requests.at(-1)!.body.equals(Buffer.from(large))).toBe(true);
      expect(await metric(url, 'token_terminator_proxy_requests_total{api="chat",outcome="no_memory"}')).toBe(1);
      // Smaller than the budget: reduced (the upstream gets fewer bytes), whatever came before.
      const fits = bodyOf(1.5 * SMALL_BODY, 2);
      const reduced = await send(url, fits, chunked);
      expect(reduced.status).toBe(200);
      expect(reduced.headers.get(UNREDUCED_HEADER)).toBeNull();
      expect(h!.upstream.requests.at(-1)!.body.length).toBeLessThan(Buffer.byteLength(fits));
    }, 60_000);

  it('reduces a small body even when the budget is spent', async () => {
    await budgeted(1);
    const small = bodyOf(SMALL_BODY / 2, 3);
    const reply = await send(h!.url, small, false);
    expect(reply.status).toBe(200);
    expect(reply.headers.get(UNREDUCED_HEADER)).toBeNull();
    expect(h!.upstream.requests.at(-1)!.body.length).toBeLessThan(Buffer.byteLength(small));
  }, 60_000);

  it('aborts a reduction running when the heap passes its abort share, and forwards the request as sent', async () => {
    let arrived: () => void = () => undefined;
    const atReduce = new Promise<void>((r) => (arrived = r));
    let go: () => void = () => undefined;
    const gate = new Promise<void>((r) => (go = r));
    const limit = 100 * 2 ** 20;
    const heap = { used: 0.5 * limit, limit };
    h = await startHarness((_r, i) => chat.text(`answer ${i}`), { proxy: { heap: () => heap, memoryCheckMs: 10 } });
    const tt = h.proxy.terminator;
    const reduceRequest = tt.reduceRequest.bind(tt);
    // The request stage waits at its start until the heap was sampled over the abort share.
    (tt as { reduceRequest: Terminator['reduceRequest'] }).reduceRequest = async (...args) => {
      arrived();
      await gate;
      return reduceRequest(...args);
    };
    const body = bodyOf(SMALL_BODY / 2, 4);
    const pending = send(h.url, body, false);
    await atReduce;
    heap.used = Math.ceil(HEAP_ABORT_AT * limit) + 1;
    while ((await metric(h.url, 'token_terminator_proxy_heap_used_bytes')) !== heap.used)
      await new Promise((r) => setTimeout(r, 10));
    go();
    const reply = await pending;
    expect(reply.status).toBe(200);
    expect(reply.headers.get(UNREDUCED_HEADER)).toBe('memory');
    expect(h.upstream.requests.at(-1)!.body.equals(Buffer.from(body))).toBe(true);
    expect(await metric(h.url, 'token_terminator_proxy_requests_total{api="chat",outcome="memory_aborted"}')).toBe(1);
    expect(h.logs.some((l) => l.event === 'reductions_aborted')).toBe(true);
  }, 60_000);
});
