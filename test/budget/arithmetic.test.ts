import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { ConfigError } from '../../src/errors.js';
import { checkBudgetSettings, effectiveReserve, planOutputCap, preflightPressure } from '../../src/budget/index.js';

describe('planOutputCap (unit)', () => {
  it('caps at the remaining space without a caller cap', () => {
    expect(planOutputCap({ window: 100_000, prompt: 60_000, reserve: 4096 })).toEqual({
      required: 4096,
      remaining: 40_000,
      cap: 40_000,
    });
  });

  it('keeps a smaller caller cap and requires only that much', () => {
    expect(planOutputCap({ window: 10_000, prompt: 9_000, reserve: 4096, callerCap: 500 })).toEqual({
      required: 500,
      remaining: 1000,
      cap: 500,
    });
  });

  it('leaves the request unchanged when remaining is below required (never max_tokens = 1)', () => {
    expect(planOutputCap({ window: 10_000, prompt: 9_999, reserve: 4096 }).cap).toBeUndefined();
    expect(planOutputCap({ window: 10_000, prompt: 12_000, reserve: 4096 }).cap).toBeUndefined();
  });

  it('inserts exactly at the boundary remaining = required', () => {
    expect(planOutputCap({ window: 10_000, prompt: 5_904, reserve: 4096 }).cap).toBe(4096);
    expect(planOutputCap({ window: 10_000, prompt: 5_905, reserve: 4096 }).cap).toBeUndefined();
  });

  it('uses a smaller explicit route cap as the reserve', () => {
    expect(effectiveReserve(4096, 1000)).toBe(1000);
    expect(effectiveReserve(4096, 8000)).toBe(4096);
    expect(effectiveReserve(4096, 0)).toBe(4096);
    expect(effectiveReserve(4096, undefined)).toBe(4096);
  });

  it('rejects F + R ≥ W and W above the context window at startup, naming the variables', () => {
    expect(() => checkBudgetSettings('t', { window: 5000, reserve: 4096, fallbackMargin: 1024 })).toThrow(ConfigError);
    expect(() => checkBudgetSettings('t', { window: 5000, reserve: 4096, fallbackMargin: 1024 })).toThrow(
      /INCONTEXT_FALLBACK_MARGIN_TOKENS \+ INCONTEXT_MIN_OUTPUT_TOKENS/,
    );
    expect(() => checkBudgetSettings('t', { window: 5121, reserve: 4096, fallbackMargin: 1024 })).not.toThrow();
    expect(() =>
      checkBudgetSettings('t', { window: 300_000, contextWindow: 200_000, reserve: 4096, fallbackMargin: 1024 }),
    ).toThrow(/exceeds the context window/);
    expect(() => checkBudgetSettings('t', { reserve: 0, fallbackMargin: 1024 })).toThrow(/INCONTEXT_MIN_OUTPUT_TOKENS/);
    expect(() => checkBudgetSettings('t', { reserve: 10, fallbackMargin: -1 })).toThrow(
      /INCONTEXT_FALLBACK_MARGIN_TOKENS/,
    );
  });
});

describe('planOutputCap (properties)', () => {
  const inputs = fc.record({
    window: fc.integer({ min: 1, max: 2_000_000 }),
    prompt: fc.integer({ min: 0, max: 4_000_000 }),
    reserve: fc.integer({ min: 1, max: 200_000 }),
    callerCap: fc.option(fc.integer({ min: -10, max: 400_000 }), { nil: undefined }),
  });

  it('never exceeds remaining, never falls below required, honours the smallest caller cap', () => {
    fc.assert(
      fc.property(inputs, (i) => {
        const plan = planOutputCap(i);
        const b = i.callerCap !== undefined && i.callerCap > 0 ? i.callerCap : undefined;
        const required = b === undefined ? i.reserve : Math.min(i.reserve, b);
        expect(plan.required).toBe(required);
        expect(plan.remaining).toBe(i.window - i.prompt);
        if (plan.remaining < required) {
          expect(plan.cap).toBeUndefined();
          return;
        }
        const cap = plan.cap ?? Number.NaN;
        expect(cap).toBeLessThanOrEqual(plan.remaining);
        expect(cap).toBeGreaterThanOrEqual(required);
        if (b === undefined || b >= i.reserve) expect(cap).toBeGreaterThanOrEqual(i.reserve);
        if (b !== undefined) expect(cap).toBe(Math.min(plan.remaining, b));
        else expect(cap).toBe(plan.remaining);
      }),
      { numRuns: 2000 },
    );
  });

  it('preflight pressure reaches W exactly when W − P < R', () => {
    fc.assert(
      fc.property(inputs, ({ window, prompt, reserve }) => {
        expect(preflightPressure(prompt, reserve) >= window).toBe(window - prompt < reserve);
      }),
      { numRuns: 2000 },
    );
  });
});
