/**
 * The README's custom-loop snippets against a loopback provider that enforces each model's real
 * output limit with the provider's wording: every first request must succeed.
 */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { wrapAnthropic, wrapOpenAI } from '../../adapters/custom-loop/index.js';
import { parseOutputCapError } from '../../src/budget/index.js';
import { createTerminator } from '../../src/runtime/index.js';
import { useLimitsRig } from '../adapters/support/limits-rig.js';
import { SERVED_MODELS, sentCap } from '../adapters/support/limits-server.js';

const rig = useLimitsRig('tt-limits-loop-');

const openaiClient = (): OpenAI => new OpenAI({ apiKey: 'test', baseURL: `${rig.server.url}/v1`, maxRetries: 0 });
const anthropicClient = (timeout?: number): Anthropic =>
  new Anthropic({
    apiKey: 'test',
    baseURL: rig.server.url,
    maxRetries: 0,
    ...(timeout === undefined ? {} : { timeout }),
  });

describe('the loopback provider enforces the real limits', () => {
  it("answers the issue's gpt-4o request with OpenAI's wording, and the retry parser reads it", async () => {
    const error = await openaiClient()
      .chat.completions.create({
        model: 'gpt-4o',
        messages: [{ role: 'user', content: 'hi' }],
        max_completion_tokens: 127_412,
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(String((error as Error).message)).toContain(
      'max_tokens is too large: 127412. This model supports at most 16384 completion tokens, whereas you provided 127412.',
    );
    expect(parseOutputCapError(error)).toEqual({ availableOutputTokens: 16_384, kind: 'model_limit' });
  });
});

describe('README: wrapOpenAI chat.completions', () => {
  it.each(['gpt-4o', 'gpt-4.1', 'o3', 'deepseek-chat'])(
    '%s succeeds on the first request with a cap within the model limit',
    async (model) => {
      const openai = wrapOpenAI(openaiClient(), rig.terminator, { sessionId: `readme-chat-${model}` });
      const { result, requests } = await rig.sent(() =>
        openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'Summarise the failing tests' }] }),
      );
      expect(result.choices[0]?.message.content).toBe('done');
      expect(requests.map((r) => r.status)).toEqual([200]);
      const cap = sentCap(requests[0]!.body);
      expect(cap).toBe(SERVED_MODELS[model]!.maxOutput);
      expect(requests[0]!.body['max_tokens']).toBeUndefined();
    },
  );
});

describe("the issue's configuration", () => {
  it("route { model: 'gpt-4o', contextWindow: 128_000 } no longer sends ≈127k: the first request succeeds", async () => {
    const openai = wrapOpenAI(openaiClient(), rig.terminator, {
      sessionId: 'issue-13',
      route: { model: 'gpt-4o', contextWindow: 128_000 },
    });
    const { requests } = await rig.sent(() =>
      openai.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }),
    );
    expect(requests.map((r) => r.status)).toEqual([200]);
    expect(sentCap(requests[0]!.body)).toBe(16_384);
  });

  it('route.outputCap bounds what is sent', async () => {
    const openai = wrapOpenAI(openaiClient(), rig.terminator, {
      sessionId: 'issue-13-cap',
      route: { contextWindow: 128_000, outputCap: 8000 },
    });
    const { requests } = await rig.sent(() =>
      openai.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }),
    );
    expect(sentCap(requests[0]!.body)).toBe(8000);
  });
});

describe('README: wrapOpenAI responses', () => {
  it.each(['gpt-4o', 'gpt-4.1', 'o4-mini'])('%s succeeds on the first request', async (model) => {
    const openai = wrapOpenAI(openaiClient(), rig.terminator, { sessionId: `readme-responses-${model}` });
    const { result, requests } = await rig.sent(() =>
      openai.responses.create({ model, input: 'Summarise the failing tests' }),
    );
    expect(result.output_text).toBe('done');
    expect(requests.map((r) => r.status)).toEqual([200]);
    // The caller sent no cap and the window leaves the model its whole ceiling, which the Responses
    // API applies by itself: none is added (a cap is added only where it limits).
    expect(requests[0]!.body['max_output_tokens']).toBeUndefined();
    expect(SERVED_MODELS[model]!.maxOutput).toBeGreaterThan(0);
  });

  it('adds a cap where the window leaves less than the model ceiling', async () => {
    const openai = wrapOpenAI(openaiClient(), rig.terminator, {
      sessionId: 'readme-responses-window',
      route: { contextWindow: 12_000 },
    });
    const { requests } = await rig.sent(() => openai.responses.create({ model: 'gpt-4o', input: 'Summarise' }));
    expect(requests.map((r) => r.status)).toEqual([200]);
    const cap = requests[0]!.body['max_output_tokens'] as number;
    expect(cap).toBeGreaterThan(0);
    expect(cap).toBeLessThan(12_000);
  });
});

describe('README: wrapAnthropic messages', () => {
  it.each(['claude-sonnet-4-5', 'claude-haiku-4-5', 'claude-opus-4-1'])(
    '%s succeeds on the first request',
    async (model) => {
      const anthropic = wrapAnthropic(anthropicClient(), rig.terminator, { sessionId: `readme-anthropic-${model}` });
      const { result, requests } = await rig.sent(() =>
        anthropic.messages.create({
          model,
          max_tokens: 16_384,
          messages: [{ role: 'user', content: 'Summarise the failing tests' }],
        }),
      );
      expect(result.content[0]).toMatchObject({ type: 'text', text: 'done' });
      expect(requests.map((r) => r.status)).toEqual([200]);
      expect(requests[0]!.body['max_tokens']).toBe(16_384);
    },
  );

  it.each(['claude-sonnet-4-5', 'claude-haiku-4-5', 'claude-opus-4-1'])(
    '%s: a max_tokens above the model ceiling is lowered to it',
    async (model) => {
      // An explicit timeout is how the SDK allows a long non-streaming request.
      const client = anthropicClient(600_000);
      const anthropic = wrapAnthropic(client, rig.terminator, { sessionId: `ceiling-${model}` });
      const { requests } = await rig.sent(() =>
        anthropic.messages.create({ model, max_tokens: 100_000, messages: [{ role: 'user', content: 'hi' }] }),
      );
      expect(requests.map((r) => r.status)).toEqual([200]);
      expect(requests[0]!.body['max_tokens']).toBe(SERVED_MODELS[model]!.maxOutput);
    },
  );
});

describe('the retry path', () => {
  it('retries once with the limit the provider names when the configured limits are wrong', async () => {
    await using wrong = await createTerminator({
      env: {},
      overrides: {
        dbPath: join(rig.dir, 'wrong.sqlite3'),
        ledger: false,
        modelLimits: { 'gpt-4o': { maxOutputTokens: 50_000 } },
      },
    });
    const openai = wrapOpenAI(openaiClient(), wrong, { sessionId: 'retry' });
    const { result, requests } = await rig.sent(() =>
      openai.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }),
    );
    expect(result.choices[0]?.message.content).toBe('done');
    expect(requests.map((r) => r.status)).toEqual([400, 200]);
    expect(requests[0]!.error).toContain('This model supports at most 16384 completion tokens');
    expect(sentCap(requests[1]!.body)).toBe(16_384);
  });

  it.each(['claude-opus-4-1', 'deepseek-chat'])(
    '%s: the provider wording of its ceiling is recognised too',
    async (model) => {
      await using wrong = await createTerminator({
        env: {},
        overrides: {
          dbPath: join(rig.dir, `wrong-${model}.sqlite3`),
          ledger: false,
          modelLimits: { [model]: { maxOutputTokens: 90_000 } },
        },
      });
      const limit = SERVED_MODELS[model]!.maxOutput;
      const call: () => Promise<unknown> =
        model === 'deepseek-chat'
          ? () =>
              wrapOpenAI(openaiClient(), wrong, { sessionId: 'r' }).chat.completions.create({
                model,
                messages: [{ role: 'user', content: 'hi' }],
              })
          : () =>
              wrapAnthropic(anthropicClient(600_000), wrong, { sessionId: 'r' }).messages.create({
                model,
                max_tokens: 90_000,
                messages: [{ role: 'user', content: 'hi' }],
              });
      const { requests } = await rig.sent(call);
      expect(requests.map((r) => r.status)).toEqual([400, 200]);
      expect(sentCap(requests[1]!.body)).toBe(limit);
    },
  );
});
