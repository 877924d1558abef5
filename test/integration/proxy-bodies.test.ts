/**
 * The proxy reuses the conversation items of a session's previous body (adapters/proxy/body.ts):
 * with the real `openai` and `@anthropic-ai/sdk` clients, a conversation that grows turn by turn
 * (and one whose earlier message changes) reaches the upstream exactly as the client sent it,
 * while the items the bodies share were taken from the earlier parse.
 */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { BodyMemo } from '../../adapters/proxy/body.js';
import { loadProxyConfig } from '../../src/config/proxy.js';
import { ConfigError } from '../../src/errors.js';
import { startHarness, type Harness } from '../proxy/support/harness.js';
import { anthropic, chat } from '../proxy/support/upstream.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

async function reused(harness: Harness, api: string): Promise<number> {
  const metric = await harness.proxy.metrics.registry.getSingleMetricAsString(
    'token_terminator_proxy_body_items_reused_total',
  );
  const line = metric
    .split('\n')
    .find((l) => l.startsWith(`token_terminator_proxy_body_items_reused_total{api="${api}"}`));
  return line === undefined ? 0 : Number(line.split(' ').at(-1));
}

describe('request bodies of a growing conversation', () => {
  it('reach the upstream as the client sent them, the shared items parsed once (chat completions)', async () => {
    h = await startHarness((_r, i) => chat.text(`answer ${i}`));
    const client = new OpenAI({ apiKey: 'sk-bodies', baseURL: `${h.url}/v1`, maxRetries: 0 });
    const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [
      { role: 'system', content: 'You are a coding agent.' },
      { role: 'user', content: 'Explain the build "failure" \u2014 caf\u00e9 \ud83d\ude00 \\ end' },
    ];
    for (let turn = 0; turn < 4; turn++) {
      const answer = await client.chat.completions.create({ model: 'gpt-4o', messages, temperature: 0 });
      messages.push({ role: 'assistant', content: answer.choices[0]!.message.content ?? '' });
      messages.push({ role: 'user', content: `next step ${turn}` });
    }
    // An earlier message changed: the items before it are still shared, the rest is parsed anew.
    messages[3] = { role: 'user', content: 'an edited request' };
    await client.chat.completions.create({ model: 'gpt-4o', messages, temperature: 0 });
    const sent = h.upstream.requests.map((r) => r.json?.['messages']);
    expect(sent.at(-1)).toEqual(messages);
    expect(sent[2]).toEqual(
      messages.slice(0, 6).map((m, i) => (i === 3 ? { role: 'user', content: 'next step 0' } : m)),
    );
    // Requests 2–4 share all earlier items (2, 4, 6), the edited one shares 3.
    expect(await reused(h, 'chat')).toBe(2 + 4 + 6 + 3);
    for (const r of h.upstream.requests) expect(r.json?.['temperature']).toBe(0);
  });

  it('reach the upstream as the client sent them (anthropic messages)', async () => {
    h = await startHarness((_r, i) => anthropic.text(`answer ${i}`));
    const client = new Anthropic({ apiKey: 'sk-ant-bodies', baseURL: h.url, maxRetries: 0 });
    const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'Fix the failing test.' }];
    for (let turn = 0; turn < 3; turn++) {
      const answer = await client.messages.create({
        model: 'claude-scripted',
        max_tokens: 256,
        system: 'You are a coding agent.',
        messages,
      });
      messages.push({ role: 'assistant', content: answer.content });
      messages.push({
        role: 'user',
        content: [{ type: 'text', text: `step ${turn}`, cache_control: { type: 'ephemeral' } }],
      });
    }
    expect(h.upstream.requests.at(-1)?.json?.['messages']).toEqual(messages.slice(0, -2));
    expect(h.upstream.requests.at(-1)?.json?.['system']).toBe('You are a coding agent.');
    expect(await reused(h, 'anthropic')).toBeGreaterThan(0);
  });

  it('parses every body whole with --body-memo-bytes 0, and rejects a bad bound', async () => {
    h = await startHarness((_r, i) => chat.text(`answer ${i}`), { flags: { bodyMemoBytes: 0 } });
    const client = new OpenAI({ apiKey: 'sk-bodies', baseURL: `${h.url}/v1`, maxRetries: 0 });
    const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'user', content: 'hi' }];
    for (let turn = 0; turn < 3; turn++) {
      await client.chat.completions.create({ model: 'gpt-4o', messages });
      messages.push({ role: 'assistant', content: 'ok' }, { role: 'user', content: `again ${turn}` });
    }
    expect(await reused(h, 'chat')).toBe(0);
    expect(h.upstream.requests.at(-1)?.json?.['messages']).toEqual(messages.slice(0, -2));
    expect(loadProxyConfig({ env: {}, flags: { workers: 1 } }).bodyMemoBytes).toBe(67_108_864);
    expect(loadProxyConfig({ env: {}, flags: { workers: 1, maxMemoryBytes: 2 ** 33 } }).bodyMemoBytes).toBe(
      268_435_456,
    );
    expect(loadProxyConfig({ env: { TOKEN_TERMINATOR_PROXY_BODY_MEMO_BYTES: '1024' } }).bodyMemoBytes).toBe(1024);
    expect(() => loadProxyConfig({ env: { TOKEN_TERMINATOR_PROXY_BODY_MEMO_BYTES: '-1' } })).toThrow(
      /TOKEN_TERMINATOR_PROXY_BODY_MEMO_BYTES/,
    );
    expect(() => new BodyMemo({ maxBytes: 1.5 })).toThrow(ConfigError);
  });
});
