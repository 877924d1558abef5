/**
 * Preflight pressure with the window fit (docs/window.md) reckons the fit's own room: W − R, less
 * what the host adds after the pipeline, over 1 + the foreign-tokenizer margin. Below W only when
 * the fit can make the request fit; then what it reports bounds what the provider will see.
 */
import { describe, expect, it } from 'vitest';
import { promptRoomFor } from '../../src/window/fit-window.js';
import { fittedPressure } from '../../src/window/pressure.js';
import type { ProviderRequest, StepContext } from '../../src/step.js';

const limits = { window: 16_000, reserve: 1000 };
const request: ProviderRequest = {
  model: 'm',
  messages: [
    { role: 'system', content: 'You help.' },
    { role: 'user', content: 'Go.' },
    { role: 'assistant', content: 'Done a.' },
    { role: 'user', content: 'Next.' },
  ],
};
const openai: StepContext = { sessionId: 's', format: 'chat', route: { provider: 'openai' } };
const anthropic: StepContext = { sessionId: 's', format: 'anthropic', route: { provider: 'anthropic' } };

/** The pressure when the least the fit can leave counts `least` tokens. */
const fitted = (least: number, context: StepContext, foreignMarginPct = 25): Promise<number> =>
  fittedPressure(request, {
    limits,
    pressure: 40_000,
    count: () => Promise.resolve(least),
    lowWaterPct: 70,
    context,
    foreignMarginPct,
  });

describe('fittedPressure', () => {
  it('stays at or above W when the least the fit leaves is within W − R but over the room (margin, added tokens)', async () => {
    // W − R = 15,000. A foreign route with a 25 % margin: the fit's room is 12,000.
    expect(await fitted(13_000, anthropic)).toBeGreaterThanOrEqual(limits.window);
    // The host adds 2,000 tokens (the recovery tool) after the pipeline: the room is 13,000.
    expect(await fitted(14_000, { ...openai, addedPromptTokens: 2000 })).toBeGreaterThanOrEqual(limits.window);
    // Nothing foreign, nothing added: it fits.
    expect(await fitted(14_000, openai)).toBeLessThan(limits.window);
  });

  it.each([
    ['openai', openai, 0],
    ['anthropic', anthropic, 25],
    ['openai + added', { ...openai, addedPromptTokens: 1500 }, 0],
    ['anthropic + added', { ...anthropic, addedPromptTokens: 1500 }, 25],
  ] as const)(
    '%s: below W exactly when the fit can fit, and at least what it leaves as the provider counts it',
    async (_, context, pct) => {
      const room = promptRoomFor(limits.window, limits.reserve, context, 25);
      const added = context.addedPromptTokens ?? 0;
      for (const least of [100, Math.floor(room * 0.7), room - 1, room, room + 1, 14_999]) {
        const p = await fitted(least, context);
        if (least > room) {
          expect(p).toBeGreaterThanOrEqual(limits.window);
          continue;
        }
        expect(p).toBeLessThan(limits.window);
        const leaves = Math.max(least, Math.floor((room * 70) / 100));
        expect(p).toBeGreaterThanOrEqual(Math.ceil((leaves * (100 + pct)) / 100) + added + limits.reserve - 1);
      }
    },
  );
});
