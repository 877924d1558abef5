import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { WeakMemo } from '../src/weak-memo.js';

/** Steps of a run: add a new key, or read / overwrite one of the keys added so far. */
const ops = fc.array(
  fc.oneof(
    fc.record({ kind: fc.constant('add' as const), value: fc.option(fc.integer(), { nil: null }) }),
    fc.record({
      kind: fc.constantFrom('get' as const, 'set' as const),
      pick: fc.nat(),
      value: fc.option(fc.integer(), { nil: null }),
    }),
  ),
  { maxLength: 200 },
);

describe('WeakMemo', () => {
  it('answers a key used at most `generation` steps ago with its last value, and forgets one idle for 2 × generation new keys', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 12 }), ops, (generation, steps) => {
        const memo = new WeakMemo<object, number | null>(generation);
        const keys: object[] = [];
        const last = new Map<object, number | null>();
        // Each step inserts at most one key into the current generation; a fresh key always does.
        // When each key was last used: the step index and the count of fresh keys so far.
        const usedStep = new Map<object, number>();
        const usedFresh = new Map<object, number>();
        let fresh = 0;
        steps.forEach((op, step) => {
          if (op.kind === 'add') {
            const key = {};
            keys.push(key);
            memo.set(key, op.value);
            last.set(key, op.value);
            usedStep.set(key, step);
            usedFresh.set(key, ++fresh);
            return;
          }
          if (keys.length === 0) return;
          const key = keys[op.pick % keys.length]!;
          const between = step - usedStep.get(key)! - 1;
          const freshBetween = fresh - usedFresh.get(key)!;
          const touch = (): void => {
            usedStep.set(key, step);
            usedFresh.set(key, fresh);
          };
          if (op.kind === 'set') {
            memo.set(key, op.value);
            last.set(key, op.value);
            touch();
            return;
          }
          const got = memo.get(key);
          if (between <= generation) expect(got).toBe(last.get(key));
          if (freshBetween >= 2 * generation) expect(got).toBeUndefined();
          if (got !== undefined || memo.has(key)) {
            expect(got).toBe(last.get(key));
            touch();
          }
        });
      }),
    );
  });

  it('keeps a key that is read at least once per generation, however many keys come after', () => {
    const memo = new WeakMemo<object, string>(8);
    const hot = {};
    memo.set(hot, 'kept');
    for (let i = 0; i < 1000; i++) {
      memo.set({}, 'cold');
      if (i % 7 === 0) expect(memo.get(hot)).toBe('kept');
    }
    expect(memo.get(hot)).toBe('kept');
  });

  it('drops a key idle for two generations (its table is released)', () => {
    const memo = new WeakMemo<object, number>(4);
    const old = {};
    memo.set(old, 1);
    for (let i = 0; i < 8; i++) memo.set({}, i);
    expect(memo.has(old)).toBe(false);
    expect(memo.get(old)).toBeUndefined();
  });

  it('stores null as a value and deletes from both generations', () => {
    const memo = new WeakMemo<object, null | number>(2);
    const a = {};
    memo.set(a, null);
    expect(memo.has(a)).toBe(true);
    expect(memo.get(a)).toBeNull();
    memo.set({}, 1);
    memo.set({}, 2);
    expect(memo.delete(a)).toBe(true);
    expect(memo.has(a)).toBe(false);
    expect(memo.delete(a)).toBe(false);
  });

  it('refuses a generation that is not a positive integer', () => {
    for (const bad of [0, -1, 1.5, Number.NaN]) expect(() => new WeakMemo(bad)).toThrow(RangeError);
  });
});
