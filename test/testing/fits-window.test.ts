/**
 * The window property with the testing kit's generated sessions, in all three wire formats: for any
 * session and any W at which the least the fit can leave and R fit, every request the stage emits
 * fits W − R by the exact counter; the instruction prefix, every user message and the newest turn
 * stay verbatim; every receipt recovers exactly.
 */
import { test } from '@fast-check/vitest';
import fc from 'fast-check';
import { from, lastValueFrom, toArray } from 'rxjs';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { fitWindow } from '../../operators/fit-window.js';
import { budgetCounterFrom } from '../../src/budget/counter.js';
import { createDigests } from '../../src/ledger/digests.js';
import { createTiktokenCounter } from '../../src/measure/index.js';
import { readRequest } from '../../src/model/index.js';
import { createStep, type ProviderRequest } from '../../src/step.js';
import { checkRecovery, conversationItems, growingSession } from '../../src/testing/index.js';
import { createVault } from '../../src/vault/index.js';
import type { Vault } from '../../src/vault/types.js';
import { floorRequest } from '../../src/window/plan.js';

const counter = createTiktokenCounter('o200k_base');
const budget = budgetCounterFrom(counter);
const R = 512;
const count = (r: ProviderRequest): Promise<number> => budget.countRequest(r, new AbortController().signal);
let vault: Vault;
beforeAll(async () => {
  vault = await createVault({ path: ':memory:' });
});
afterAll(async () => {
  await vault.close();
  counter.dispose?.();
});

/** Items before the first assistant item, and from the last assistant item on. */
function edges(r: ProviderRequest): { prefix: unknown[]; newest: unknown[]; users: unknown[] } {
  const items = conversationItems(r) as { role?: string; content?: unknown }[];
  const first = items.findIndex((m) => m.role === 'assistant' || (m as { type?: string }).type === 'function_call');
  const last = items.findLastIndex((m) => m.role === 'assistant' || (m as { type?: string }).type === 'function_call');
  const users = items.filter(
    (m) =>
      m.role === 'user' &&
      !(Array.isArray(m.content) && m.content.some((p) => (p as { type?: string }).type === 'tool_result')),
  );
  return { prefix: items.slice(0, Math.max(0, first)), newest: last < 0 ? [] : items.slice(last), users };
}

describe('fitWindow (property, testing kit sessions)', () => {
  test.prop(
    [growingSession({ sizes: ['medium', 'large'], minTurns: 2, maxTurns: 4 }), fc.integer({ min: 0, max: 3000 })],
    {
      numRuns: 12,
    },
  )('every request fits W − R where the least the fit can leave fits', async (session, slack) => {
    const digests = createDigests();
    let least = 0;
    for (const r of session) {
      const floor = floorRequest(r, readRequest(r), { digests, diagnosticChars: 0, viewChars: 200 }, 600) ?? r;
      least = Math.max(least, await count(floor));
    }
    // The least the fit leaves (prefix, user messages, newest turn) and room for its block receipts.
    const W = Math.max(least + R + 320 + slack, 2048);
    const op = fitWindow({
      vault,
      counter,
      budget: { compressionWindowTokens: W, minOutputTokens: R, counter: budget },
    });
    const context = { sessionId: `prop-${W}-${session.length}` };
    const outs = await lastValueFrom(from(session.map((r) => createStep(r, context))).pipe(op, toArray()));
    for (const [k, out] of outs.entries()) {
      expect((await count(out.value)) + R).toBeLessThanOrEqual(W);
      const a = edges(session[k]!);
      const b = edges(out.value);
      expect(b.prefix).toEqual(a.prefix);
      expect(b.newest).toEqual(a.newest);
      expect(b.users).toEqual(a.users);
      await checkRecovery(vault, session.slice(0, k + 1), out, `request ${k}`);
    }
  });
});
