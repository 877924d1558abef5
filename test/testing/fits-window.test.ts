/**
 * The window property with the testing kit's generated sessions, in each of the three wire formats:
 * for any session and any W at which the least the fit can leave and R fit (drawn below the
 * session's largest request, so the fit must act), every request the stage emits fits W − R by the
 * exact counter; the instruction prefix, every user message and the newest turn stay verbatim; every
 * receipt recovers exactly, and a request that was over names at least one.
 */
import { test } from '@fast-check/vitest';
import fc from 'fast-check';
import { from, lastValueFrom, toArray } from 'rxjs';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { fitWindow } from '../../operators/fit-window.js';
import { budgetCounterFrom } from '../../src/budget/counter.js';
import { createTiktokenCounter } from '../../src/measure/index.js';
import { readRequest } from '../../src/model/index.js';
import { createStep, type ProviderRequest } from '../../src/step.js';
import { referencedArtifacts } from '../../src/receipts/index.js';
import { checkRecovery, conversationItems, growingSession, WIRE_FORMATS } from '../../src/testing/index.js';
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
  for (const format of WIRE_FORMATS)
    test.prop(
      [
        growingSession({ sizes: ['medium', 'large'], minTurns: 2, maxTurns: 4, formats: [format] }),
        fc.double({ min: 0, max: 0.9, noNaN: true }),
      ],
      { numRuns: 8 },
    )(`${format}: every request fits W − R where the least the fit can leave fits`, async (session, share) => {
      let least = 0;
      let most = 0;
      for (const r of session) {
        const floor = floorRequest(r, readRequest(r)) ?? r;
        least = Math.max(least, await count(floor));
        most = Math.max(most, await count(r));
      }
      // The least the fit leaves (prefix, user messages, newest turn) and room for its block receipts;
      // below the largest request whenever that is above it, so the fit has to act.
      const low = Math.max(least + R + 320, 2048);
      const W = most + R > low ? Math.floor(low + share * (most + R - low)) : low;
      const op = fitWindow({
        vault,
        counter,
        budget: { compressionWindowTokens: W, minOutputTokens: R, counter: budget },
      });
      const context = { sessionId: `prop-${format}-${W}-${session.length}-${most}` };
      const outs = await lastValueFrom(from(session.map((r) => createStep(r, context))).pipe(op, toArray()));
      for (const [k, out] of outs.entries()) {
        const raw = await count(session[k]!);
        expect((await count(out.value)) + R).toBeLessThanOrEqual(W);
        const a = edges(session[k]!);
        const b = edges(out.value);
        expect(b.prefix).toEqual(a.prefix);
        expect(b.newest).toEqual(a.newest);
        expect(b.users).toEqual(a.users);
        await checkRecovery(vault, session.slice(0, k + 1), out, `request ${k}`);
        if (raw + R > W) {
          // Not vacuous: a request over W − R was rewritten, and what it names recovers (checked above).
          expect(out.decisions.some((d) => d.stage === 'fitWindow' && d.kind === 'applied')).toBe(true);
          expect(referencedArtifacts(allText(out.value)).length).toBeGreaterThan(0);
        }
      }
    });
});

/** Every string of a value, joined. */
function allText(value: unknown): string {
  const out: string[] = [];
  const walk = (v: unknown): void => {
    if (typeof v === 'string') out.push(v);
    else if (Array.isArray(v)) v.forEach(walk);
    else if (typeof v === 'object' && v !== null) Object.values(v).forEach(walk);
  };
  walk(value);
  return out.join('\n');
}
