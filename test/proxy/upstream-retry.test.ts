/**
 * An upstream that closes an idle keep-alive connection just as the gateway's pool reuses it: the
 * request is sent once more on a new connection and the agent gets its answer; a failure after
 * the answer began, a timeout, or a second close is not retried. The upstream is a real HTTP
 * server on loopback that decides what to do by counting connections and the requests on each, so
 * nothing here depends on timing; the agent is the OpenAI SDK with its own retries off.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { createUpstreamAgent, sendUpstream } from '../../adapters/proxy/upstream.js';
import { startHarness, type Harness } from './support/harness.js';
import { chat } from './support/upstream.js';

/** What the upstream does with a request: `n`th connection (from 0), `k`th request on it (from 0). */
type Behaviour = (n: number, k: number, req: IncomingMessage, res: ServerResponse) => void;

interface CountingUpstream {
  readonly url: string;
  readonly connections: () => number;
  readonly requests: () => number;
  close(): Promise<void>;
}

async function countingUpstream(behaviour: Behaviour): Promise<CountingUpstream> {
  const order = new Map<Socket, { n: number; k: number }>();
  let requests = 0;
  const server: Server = createServer((req, res) => {
    const seen = order.get(req.socket) ?? { n: order.size, k: 0 };
    order.set(req.socket, { n: seen.n, k: seen.k + 1 });
    requests += 1;
    req.resume();
    req.once('end', () => behaviour(seen.n, seen.k, req, res));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    connections: () => order.size,
    requests: () => requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** A whole chat completion, as the shared scripted upstream writes it. */
const completion = (content: string): string => JSON.stringify((chat.text(content) as { json: unknown }).json);

/** Answer with a whole completion on a kept-alive connection. */
function answer(res: ServerResponse, content: string): void {
  const body = completion(content);
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

let h: Harness | undefined;
let upstream: CountingUpstream | undefined;
afterEach(async () => {
  await h?.close();
  await upstream?.close();
  h = undefined;
  upstream = undefined;
});

async function gatewayTo(behaviour: Behaviour): Promise<{ h: Harness; upstream: CountingUpstream }> {
  upstream = await countingUpstream(behaviour);
  h = await startHarness(() => 'hang', { flags: { upstream: upstream.url, anthropicUpstream: upstream.url } });
  return { h, upstream };
}

const ask = (url: string, content: string): Promise<unknown> =>
  new OpenAI({ apiKey: 'sk-test', baseURL: `${url}/v1`, maxRetries: 0 }).chat.completions
    .create({ model: 'gpt-4o', messages: [{ role: 'user', content }] })
    .then((c) => c.choices[0]?.message.content)
    .catch((e: unknown) => e);

async function retries(harness: Harness): Promise<number> {
  const metric = (await harness.proxy.metrics.registry.getMetricsAsJSON()).find(
    (m) => m.name === 'token_terminator_proxy_upstream_retries_total',
  );
  return metric?.values.reduce((sum, v) => sum + v.value, 0) ?? 0;
}

describe('gateway upstream: a connection closed before the answer is sent once more', () => {
  it('answers the agent when the upstream closes the reused keep-alive connection unanswered, counting one retry', async () => {
    const { h, upstream } = await gatewayTo((n, k, req, res) => {
      // The first connection's second request: the upstream closes it as if idle, unanswered.
      if (n === 0 && k === 1) return void req.socket.destroy();
      answer(res, `answer ${n}.${k}`);
    });
    expect(await ask(h.url, 'one')).toBe('answer 0.0');
    expect(await ask(h.url, 'two')).toBe('answer 1.0');
    expect(upstream.connections()).toBe(2);
    expect(upstream.requests()).toBe(3);
    expect(await retries(h)).toBe(1);
    expect(h.logs.filter((r) => r.event === 'upstream_retried')).toHaveLength(1);
    expect(h.logs.filter((r) => r.event === 'upstream_failed')).toHaveLength(0);
  });

  it('sends a request at most twice: an upstream that closes every connection unanswered reaches the agent as a reset', async () => {
    const { h, upstream } = await gatewayTo((_n, _k, req) => void req.socket.destroy());
    const err = await ask(h.url, 'one');
    expect(err).toBeInstanceOf(OpenAI.APIConnectionError);
    expect(upstream.requests()).toBe(2);
    expect(await retries(h)).toBe(1);
  });

  it('does not retry once the answer began: a reset after the headers and some bytes reaches the agent', async () => {
    const { h, upstream } = await gatewayTo((_n, _k, req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': 1000 });
      res.write('{"id":"cc-1",', () => req.socket.destroy());
    });
    const err = await ask(h.url, 'one');
    expect(err).toBeInstanceOf(Error);
    expect(upstream.requests()).toBe(1);
    expect(upstream.connections()).toBe(1);
    expect(await retries(h)).toBe(0);
  });

  it('does not retry a timeout: no headers in time fails once', async () => {
    upstream = await countingUpstream(() => undefined);
    const agent = createUpstreamAgent(50);
    let retried = 0;
    try {
      const err = await sendUpstream(agent, {
        base: upstream.url,
        pathAndQuery: '/v1/chat/completions',
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: Buffer.from('{}'),
        signal: new AbortController().signal,
        onRetry: () => (retried += 1),
      }).catch((e: unknown) => e);
      expect((err as { code?: string }).code).toBe('UND_ERR_HEADERS_TIMEOUT');
    } finally {
      await agent.destroy();
    }
    expect(retried).toBe(0);
    expect(upstream.requests()).toBe(1);
  });
});
