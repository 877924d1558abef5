import { readFileSync } from 'node:fs';
import { fc, test } from '@fast-check/vitest';
import { afterAll, describe, expect, it } from 'vitest';
import { canonicalJson, codePoints, createTiktokenCounter } from '../../src/measure/index.js';
import { attributeRequest, COMPONENTS } from '../../src/telemetry/attribution.js';
import { createMessagesMeter } from '../../src/ledger/messages-meter.js';
import { createItemMeasures } from '../../src/ledger/item-measures.js';

const counter = createTiktokenCounter();
afterAll(() => counter.dispose?.());

const sample = JSON.parse(
  readFileSync(new URL('../../examples/sessions/sample.jsonl', import.meta.url), 'utf8').trim(),
) as {
  messages: Record<string, unknown>[];
};

describe('createMessagesMeter', () => {
  it('counts exactly what tokenizing the whole serialized array counts, on real tool output', () => {
    const meter = createMessagesMeter(counter);
    for (const k of [0, 1, 2, 3, 9, 20, sample.messages.length]) {
      const messages = sample.messages.slice(0, k);
      const whole = canonicalJson(messages);
      expect(meter.tokens(messages)).toBe(counter.count(whole));
      expect(meter.chars(messages)).toBe(codePoints(whole));
    }
  });

  test.prop(
    [
      fc.array(
        fc.record({
          role: fc.constantFrom('user', 'assistant', 'tool'),
          content: fc.string({ unit: 'grapheme', maxLength: 60 }),
        }),
        { maxLength: 6 },
      ),
    ],
    {
      numRuns: 60,
    },
  )('sums segments to the whole-array count for arbitrary messages, alone and over the shared memo', (messages) => {
    const whole = canonicalJson(messages);
    const measures = createItemMeasures({ counter });
    // The stages measured the items first: telemetry reads their entries and derives the spaced text.
    for (const m of messages) measures.compactTokens(m);
    for (const meter of [createMessagesMeter(counter), createMessagesMeter(counter, { measures })]) {
      expect(meter.tokens(messages)).toBe(counter.count(whole));
      expect(meter.chars(messages)).toBe(codePoints(whole));
      expect(meter.tokens(structuredClone(messages))).toBe(counter.count(whole));
    }
  });

  it('serializes each message object once', () => {
    let calls = 0;
    const counting = { name: 'c', exact: true, count: (t: string) => (calls++, t.length) };
    const meter = createMessagesMeter(counting);
    const ms = [
      { role: 'user', content: 'a' },
      { role: 'assistant', content: 'b' },
      { role: 'user', content: 'c' },
    ];
    meter.tokens(ms);
    const before = calls;
    meter.tokens(ms);
    expect(calls).toBe(before);
  });
});

describe('attributeRequest', () => {
  it('splits a request into the §2.17 buckets and leaves only framing unattributed', () => {
    const meter = createMessagesMeter(counter);
    const skills = '<available_skills>\n- github-release: publish a release\n- calendar: meetings\n</available_skills>';
    const request = {
      model: 'gpt-4o',
      tools: [{ type: 'function', function: { name: 'terminal', parameters: {} } }],
      messages: [
        { role: 'system', content: `Be brief.\n${skills}` },
        { role: 'user', content: 'first question' },
        {
          role: 'assistant',
          content: '',
          tool_calls: [{ id: 'c', type: 'function', function: { name: 'terminal', arguments: '{}' } }],
        },
        { role: 'tool', tool_call_id: 'c', content: 'output '.repeat(50) },
        { role: 'user', content: 'current question' },
      ],
    };
    const a = attributeRequest(request, meter);
    expect(a.totalChars).toBe(codePoints(canonicalJson(request)));
    expect(Object.keys(a.components)).toEqual([...COMPONENTS]);
    const c = a.components;
    expect(c.tool_results.chars).toBe(codePoints(canonicalJson(request.messages[3])));
    expect(c.current_user.chars).toBe(codePoints(canonicalJson(request.messages[4])));
    expect(c.history.chars).toBe(
      codePoints(canonicalJson(request.messages[1])) + 1 + codePoints(canonicalJson(request.messages[2])),
    );
    expect(c.tool_schemas.chars).toBe(codePoints(canonicalJson(request.tools)));
    expect(c.other.chars).toBe(codePoints('"gpt-4o"'));
    expect(c.skill_catalog.chars).toBe(codePoints(canonicalJson(skills)));
    expect(c.instructions.chars).toBe(codePoints(canonicalJson({ role: 'system', content: 'Be brief.\n' })));
    expect(c.framing.chars).toBeGreaterThan(0);
    expect(c.tool_results.tokens).toBeGreaterThan(c.current_user.tokens);
  });

  it('puts a Responses string input into current_user', () => {
    const meter = createMessagesMeter(counter);
    const a = attributeRequest({ model: 'gpt-5', instructions: 'Be brief.', input: 'hello there' }, meter);
    expect(a.components.current_user.chars).toBe(codePoints('"hello there"'));
    expect(a.components.instructions.chars).toBe(codePoints('"Be brief."'));
  });
});
