/**
 * The walks a request carries to the session's next one instead of walking the whole history again
 * (issue 50): the steps of the history (src/compile/steps.ts), the chain hashes
 * (src/compile/conversation.ts) and the host's tool outputs (src/compile/observations.ts). Each
 * gives what a fresh walk gives, over histories that grow, are cut, are edited in the middle, are rebuilt or resent.
 */
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createChainMemo } from '../../src/compile/conversation.js';
import { createObservationMemo, hostToolOutputs } from '../../src/compile/observations.js';
import { segmentSteps } from '../../src/compile/steps.js';
import type { ItemInfo } from '../../src/model/types.js';
import { createVault } from '../../src/vault/index.js';
import { carryOp, compareCarried, type CarryOp } from './carry-sessions.js';
import { fileFixture } from './helpers.js';

const { dir, counter } = fileFixture('walk-carries');

const info: fc.Arbitrary<ItemInfo> = fc.record({
  role: fc.constantFrom('system', 'user', 'assistant', 'tool'),
  userText: fc.boolean(),
}) as fc.Arbitrary<ItemInfo>;

/** Each request compiled by a session that carries and by one that forgets every walk of this file first: the same. */
async function compare(ops: readonly CarryOp[]): Promise<void> {
  await compareCarried(ops, {
    vault: await createVault({ path: join(dir, `walks-${run++}.sqlite3`) }),
    counter,
    forget: (state) => {
      delete state.memo.steps;
      delete state.memo.named;
      Object.assign(state, { observations: createObservationMemo(), chain: createChainMemo() });
    },
    edit: (messages, at, next) => {
      const k = 2 + (at % (messages.length - 2));
      const edited = messages.slice();
      // An odd edit makes the item a user message: the steps of the history change too.
      edited[k] = {
        ...(at % 2 === 0 ? (messages[k] as object) : { role: 'user' }),
        content: `edited ${next}\n`.repeat(90),
      };
      return edited;
    },
    request: (state, seen) =>
      expect(hostToolOutputs(seen.view, state.observations)).toEqual(
        seen.view.slots.filter((slot) => slot.kind === 'tool_output'),
      ),
  });
}

let run = 0;

describe('the walks a request carries', () => {
  it('segments the steps of a longer history from those of its leading run as it segments them anew', () => {
    fc.assert(
      fc.property(fc.array(info, { maxLength: 30 }), fc.nat(), (items, k) => {
        const lead = items.slice(0, k % (items.length + 1));
        const carried = segmentSteps(items, segmentSteps(lead));
        expect(carried).toEqual(segmentSteps(items));
      }),
      { numRuns: 500 },
    );
  });

  it('hashes a list grown, cut or edited as a fresh chain does, and never changes a list it returned', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.nat(6), fc.nat(3)), { maxLength: 12 }), (edits) => {
        const memo = createChainMemo();
        let items: unknown[] = [];
        let before: { list: readonly string[]; copy: string[] } | undefined;
        for (const [add, cut] of edits) {
          items = [...items.slice(0, Math.max(0, items.length - cut)), ...Array.from({ length: add }, () => ({}))];
          const hash = (item: unknown): string => String(items.indexOf(item));
          const list = memo.hashes(items, hash);
          expect(list).toEqual(createChainMemo().hashes(items, hash));
          if (before !== undefined) expect(before.list).toEqual(before.copy);
          before = { list, copy: list.slice() };
        }
      }),
    );
  });

  it('compiles the requests a session forgetting every walk compiles, as the history grows and is rewritten', async () => {
    const ops: CarryOp[] = [];
    for (let t = 0; t < 30; t++) ops.push({ kind: t % 7 === 3 ? 'ask' : t % 5 === 4 ? 'think' : 'grow', lines: 80 });
    ops.push({ kind: 'edit', at: 5 }, { kind: 'grow', lines: 80 }, { kind: 'rebuild' }, { kind: 'recent' });
    ops.push({ kind: 'edit', at: 8 }, { kind: 'grow', lines: 80 }, { kind: 'edit', at: 11 }, { kind: 'resend' });
    for (let t = 0; t < 6; t++) ops.push({ kind: 'grow', lines: 80 }, { kind: 'resend' });
    ops.push({ kind: 'cut', pairs: 6 }, { kind: 'grow', lines: 80 }, { kind: 'recent' }, { kind: 'grow', lines: 80 });
    await compare(ops);
  });

  it('compiles the same requests over histories grown, cut, edited in the middle, rebuilt and resent', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(carryOp(true), { minLength: 20, maxLength: 40 }), async (ops) => {
        await compare(ops);
      }),
      { numRuns: 6 },
    );
  });
});
