import { fc, test } from '@fast-check/vitest';
import { afterAll, describe, expect, it } from 'vitest';
import { budgetCounterFrom } from '../../src/budget/counter.js';
import { createItemMeasures, spacedFromCompact } from '../../src/ledger/item-measures.js';
import { createMeter } from '../../src/ledger/request-meter.js';
import { ConfigError } from '../../src/errors.js';
import { canonicalJson, codePoints, createTiktokenCounter, serializedChars } from '../../src/measure/index.js';
import type { TokenCounter } from '../../src/measure/types.js';
import { createMessagesMeter } from '../../src/ledger/messages-meter.js';

// A counter without a memo: every count below is a fresh tokenization.
const counter = createTiktokenCounter('o200k_base');
afterAll(() => counter.dispose?.());

/** Strings with what the separator rewrite must leave alone: separators, quotes, escapes, surrogates. */
const tricky = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 24 }),
  fc.constantFrom('', ', ', ': ', '","', '":"', '\\', '\\"', '"', '\\\\",', '\ud800', '{"a":1}', '[1,2]'),
  fc
    .array(fc.constantFrom(',', ':', '"', '\\', ' ', 'a', '\n', '\u0001', '😀'), { maxLength: 12 })
    .map((a) => a.join('')),
);
const json = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    tricky,
    fc.integer(),
    fc.double(),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(tricky, tie('value'), { maxKeys: 4 }),
  ),
})).value;

const message = fc.record({
  role: fc.constantFrom('system', 'user', 'assistant', 'tool'),
  content: fc.oneof(tricky, fc.array(fc.record({ type: fc.constant('text'), text: tricky }), { maxLength: 2 })),
});

describe('spacedFromCompact', () => {
  test.prop([json], { numRuns: 400 })('turns compact canonical JSON into the spaced one, exactly', (value) => {
    expect(spacedFromCompact(canonicalJson(value, { compact: true }))).toBe(canonicalJson(value));
  });

  it('keeps a long string literal intact (no backtracking blow-up)', () => {
    const value = { content: `${'a, b: "c" \\ '.repeat(200_000)}`, role: 'tool' };
    expect(spacedFromCompact(canonicalJson(value, { compact: true }))).toBe(canonicalJson(value));
  });
});

describe('createItemMeasures', () => {
  it('keeps maxEntries contents, dropping the least recently used: a rebuilt copy of a kept one is not counted again', () => {
    let calls = 0;
    const counting: TokenCounter = { ...counter, count: (text, key) => (calls++, counter.count(text, key)) };
    const measures = createItemMeasures({ counter: counting, maxEntries: 2 });
    const item = (n: number): object => ({ role: 'tool', content: `output number ${n}` });
    const counted = (value: object): number => {
      const before = calls;
      measures.compactTokens(value);
      return calls - before;
    };
    expect(counted(item(1))).toBeGreaterThan(0);
    expect(counted(item(2))).toBeGreaterThan(0);
    expect(counted(item(1))).toBe(0); // a rebuilt copy: found by content, and now the most recent
    expect(counted(item(3))).toBeGreaterThan(0); // drops item 2, the least recently used
    expect(measures.size).toBe(2);
    expect(counted(item(1))).toBe(0);
    expect(counted(item(3))).toBe(0);
    expect(counted(item(2))).toBeGreaterThan(0);
  });

  it('rejects a bad maxEntries with a ConfigError naming the API and the option', () => {
    for (const maxEntries of [0, -1, 2.5, Number.NaN]) {
      expect(() => createItemMeasures({ maxEntries })).toThrow(ConfigError);
      expect(() => createItemMeasures({ maxEntries })).toThrow(
        `createItemMeasures: options.maxEntries must be an integer ≥ 1 (got ${String(maxEntries)})`,
      );
    }
  });

  test.prop([fc.array(message, { minLength: 1, maxLength: 6 }), fc.boolean()], { numRuns: 60 })(
    'what the shared memo answers equals a fresh count of canonicalJson, whichever reader asks first and for rebuilt copies',
    async (messages, budgetFirst) => {
      const measures = createItemMeasures({ counter });
      const meter = createMeter({ counter, measures });
      const telemetry = createMessagesMeter(counter, { measures });
      const budget = budgetCounterFrom(counter, { identityCache: true, measures });
      const request = { model: 'gpt-4o', messages };
      const fresh = await budgetCounterFrom(counter).countRequest(request, new AbortController().signal);
      const read = async (list: readonly unknown[]): Promise<void> => {
        if (budgetFirst)
          expect(await budget.countRequest({ ...request, messages: list }, new AbortController().signal)).toBe(fresh);
        for (const item of list) {
          expect(meter.tokens(item)).toBe(counter.count(canonicalJson(item, { compact: true })));
          expect(meter.measure(item).chars).toBe(serializedChars(item));
          expect(measures.entry(item).chars).toBe(codePoints(canonicalJson(item)));
          expect(telemetry.midTokens(item)).toBe(counter.count(` ${canonicalJson(item)},`));
          expect(telemetry.aloneTokens(item)).toBe(counter.count(canonicalJson(item)));
          expect(telemetry.entry(item).json).toBe(canonicalJson(item));
        }
        expect(telemetry.tokens(list)).toBe(counter.count(canonicalJson(list)));
        expect(telemetry.chars(list)).toBe(codePoints(canonicalJson(list)));
        if (!budgetFirst)
          expect(await budget.countRequest({ ...request, messages: list }, new AbortController().signal)).toBe(fresh);
      };
      await read(messages);
      await read(structuredClone(messages)); // a host that rebuilds its objects: found by content hash
    },
  );

  it('tokenizes each text of an item once, whoever reads it', async () => {
    const counted = new Map<string, number>();
    const counting: TokenCounter = {
      name: 'counting',
      exact: true,
      count: (text) => (counted.set(text, (counted.get(text) ?? 0) + 1), counter.count(text)),
    };
    const measures = createItemMeasures({ counter: counting });
    const messages = [
      { role: 'user', content: 'list the files, then read: the first one' },
      { role: 'assistant', content: 'ok' },
      { role: 'tool', content: 'a.txt, b.txt' },
    ];
    // The key names are the budget adapter's own (memoized) texts: one adapter, as the runtime has.
    const budget = budgetCounterFrom(counting, { measures });
    for (let i = 0; i < 2; i++) {
      const list = i === 0 ? messages : structuredClone(messages);
      const meter = createMeter({ counter: counting, measures });
      for (const item of list) meter.tokens(item);
      await budget.countRequest({ messages: list }, new AbortController().signal);
      createMessagesMeter(counting, { measures }).tokens(list);
    }
    for (const item of messages) expect(counted.get(canonicalJson(item, { compact: true }))).toBe(1);
    expect([...counted].filter(([, n]) => n > 1)).toEqual([]);
  });

  it('falls back to its own memo when the shared one counts with another counter', () => {
    const other = createItemMeasures({ counter: createTiktokenCounter('cl100k_base') });
    const item = { role: 'user', content: 'hello there' };
    const meter = createMeter({ counter, measures: other });
    expect(meter.tokens(item)).toBe(counter.count(canonicalJson(item, { compact: true })));
    expect(other.entry(item).compact).toBeUndefined();
  });

  it('stays bounded by content hash', () => {
    const measures = createItemMeasures({ maxEntries: 10 });
    for (let i = 0; i < 50; i++) measures.entry({ role: 'user', content: `m${i}` });
    expect(measures.size).toBe(10);
  });
});
