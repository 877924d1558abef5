import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { chatCompletion, DriftGuard, EvalDriftError, EvalProviderError } from '../../src/eval/index.js';

let server: Server | undefined;
afterEach(async () => {
  const s = server;
  server = undefined;
  if (s !== undefined) await new Promise<void>((resolve) => (s.closeAllConnections(), s.close(() => resolve())));
});

/** A loopback server answering request n with `answers[n]`: a status and body, or 'reset' (drop the socket unanswered). */
async function serve(
  answers: ({ status: number; body: unknown } | 'reset')[],
): Promise<{ url: string; count: () => number }> {
  let n = 0;
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const a = answers[n++] ?? { status: 500, body: { error: { message: 'script exhausted' } } };
      if (a === 'reset') return void req.socket.destroy();
      res.writeHead(a.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(a.body));
    });
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, count: () => n };
}

const ok = {
  status: 200,
  body: {
    model: 'm-1',
    system_fingerprint: 'fp',
    choices: [{ message: { role: 'assistant', content: 'ANSWER: 1' } }],
    usage: { prompt_tokens: 7, completion_tokens: 2 },
  },
};

describe('eval client', () => {
  it('reads the message, usage and serving identity', async () => {
    const s = await serve([ok]);
    const r = await chatCompletion({ model: 'm' }, { baseUrl: s.url });
    expect(r).toEqual({
      message: { role: 'assistant', content: 'ANSWER: 1' },
      identity: { model: 'm-1', system_fingerprint: 'fp' },
      promptTokens: 7,
      completionTokens: 2,
    });
  });

  it('retries a connection dropped before any answer, but never an HTTP error', async () => {
    const s = await serve(['reset', ok]);
    expect((await chatCompletion({}, { baseUrl: s.url })).promptTokens).toBe(7);
    expect(s.count()).toBe(2);
    await new Promise<void>((resolve) => (server!.closeAllConnections(), server!.close(() => resolve())));
    const e = await serve([{ status: 429, body: { error: { message: 'slow down' } } }, ok]);
    await expect(chatCompletion({}, { baseUrl: e.url })).rejects.toThrow(
      new EvalProviderError(`HTTP 429 from ${e.url}/chat/completions: slow down`),
    );
    expect(e.count()).toBe(1);
  });

  it('names an answer that is not a chat completion', async () => {
    const s = await serve([{ status: 200, body: { choices: [] } }]);
    await expect(chatCompletion({}, { baseUrl: s.url })).rejects.toThrow(/without choices\[0\]\.message/);
  });

  it('the drift guard accepts the same identity and rejects a changed model', () => {
    const g = new DriftGuard();
    g.check({ model: 'a', system_fingerprint: null }, 'x');
    g.check({ model: 'a', system_fingerprint: null }, 'y');
    expect(() => g.check({ model: 'b', system_fingerprint: null }, 'pair 3 (off arm, request 1)')).toThrow(
      EvalDriftError,
    );
    expect(() => g.check({ model: 'b', system_fingerprint: null }, 'pair 3 (off arm, request 1)')).toThrow(
      'provider drift at pair 3 (off arm, request 1): model changed from "a" to "b"',
    );
  });
});
