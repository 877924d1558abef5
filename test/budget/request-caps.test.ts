import { describe, expect, it } from 'vitest';
import {
  capFieldFor,
  detectRequestFormat,
  promptParts,
  readCallerCap,
  roughRequestTokens,
  withOutputCap,
} from '../../src/budget/index.js';
import { deepFreeze } from './helpers.js';

describe('readCallerCap', () => {
  it('takes the smallest positive integer of the three fields, also inside extra_body', () => {
    expect(
      readCallerCap({ max_tokens: 9000, max_completion_tokens: 7000, extra_body: { max_output_tokens: 8000 } }),
    ).toBe(7000);
    expect(readCallerCap({ max_tokens: 9000, extra_body: { max_tokens: 300 } })).toBe(300);
    expect(readCallerCap({ max_tokens: 0, max_completion_tokens: -5, max_output_tokens: 1.5 })).toBeUndefined();
    expect(readCallerCap({ max_tokens: '100', extra_body: 'x' })).toBeUndefined();
    expect(readCallerCap({})).toBeUndefined();
  });
});

describe('detectRequestFormat', () => {
  it('tells Chat Completions, Responses and Anthropic Messages apart', () => {
    expect(detectRequestFormat({ model: 'gpt-5', input: 'hi' })).toBe('responses');
    expect(detectRequestFormat({ model: 'gpt-5', input: [{ type: 'message', role: 'user', content: 'hi' }] })).toBe(
      'responses',
    );
    expect(
      detectRequestFormat({
        messages: [
          { role: 'system', content: 's' },
          { role: 'user', content: 'hi' },
        ],
      }),
    ).toBe('chat');
    expect(detectRequestFormat({ messages: [{ role: 'user', content: 'hi' }] })).toBe('chat');
    expect(detectRequestFormat({ system: 'be brief', messages: [{ role: 'user', content: 'hi' }] })).toBe('anthropic');
    expect(
      detectRequestFormat({
        messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: 'x' }] }],
      }),
    ).toBe('anthropic');
    expect(detectRequestFormat({ messages: [{ role: 'user', content: 'hi' }] }, 'anthropic')).toBe('anthropic');
    expect(detectRequestFormat({ prompt: 'legacy completion' })).toBe('unknown');
  });
});

describe('capFieldFor', () => {
  it('emits the field each format expects', () => {
    expect(capFieldFor('responses', {})).toBe('max_output_tokens');
    expect(capFieldFor('anthropic', {})).toBe('max_tokens');
    expect(capFieldFor('chat', {})).toBe('max_completion_tokens');
    expect(capFieldFor('chat', { max_tokens: 10 })).toBe('max_tokens');
    expect(capFieldFor('chat', { extra_body: { max_tokens: 10 } })).toBe('max_tokens');
    expect(capFieldFor('chat', { max_tokens: 10, max_completion_tokens: 5 })).toBe('max_completion_tokens');
    expect(capFieldFor('chat', { max_output_tokens: 10 }, 'vllm')).toBe('max_tokens');
    expect(capFieldFor('chat', {}, 'vllm')).toBe('max_tokens');
    expect(capFieldFor('chat', { max_completion_tokens: 10 }, 'vllm')).toBe('max_completion_tokens');
    expect(capFieldFor('unknown', {})).toBeUndefined();
  });
});

describe('withOutputCap', () => {
  it('removes every alias (top level and extra_body), writes one field, shares the rest and never mutates', () => {
    const messages = [{ role: 'user', content: 'hi' }];
    const request = deepFreeze({
      model: 'm',
      messages,
      max_tokens: 10,
      max_output_tokens: 20,
      extra_body: { max_completion_tokens: 5, top_k: 3 },
    });
    const before = structuredClone(request);
    const out = withOutputCap(request, 'max_completion_tokens', 99);
    expect(out).toEqual({ model: 'm', messages, max_completion_tokens: 99, extra_body: { top_k: 3 } });
    expect(out['messages']).toBe(messages);
    expect(request).toEqual(before);
  });

  it('leaves extra_body untouched when it has no cap field', () => {
    const extra = { top_k: 3 };
    const out = withOutputCap({ extra_body: extra, max_tokens: 4 }, 'max_tokens', 7);
    expect(out['extra_body']).toBe(extra);
    expect(out['max_tokens']).toBe(7);
  });
});

describe('prompt parts and the rough estimate', () => {
  it('counts everything but the cap fields, splitting arrays into elements', () => {
    const request = {
      model: 'm',
      messages: [
        { role: 'user', content: 'a' },
        { role: 'assistant', content: 'b' },
      ],
      max_tokens: 5,
      extra_body: { max_tokens: 9, top_k: 2 },
    };
    expect(promptParts(request)).toEqual([
      'model',
      '"m"',
      'messages',
      '{"content":"a","role":"user"}',
      '{"content":"b","role":"assistant"}',
      'top_k',
      '2',
    ]);
    expect(roughRequestTokens(request)).toBe(promptParts(request).reduce((n, p) => n + Math.ceil(p.length / 4), 0));
  });
});
