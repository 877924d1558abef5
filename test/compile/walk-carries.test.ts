/**
 * The walks a request carries to the session's next one instead of walking the whole history again
 * (issue 50): the steps of the history (src/compile/steps.ts), the chain hashes
 * (src/compile/conversation.ts) and the host's tool outputs (src/compile/observations.ts). Each
 * gives what a fresh walk gives, over histories that grow, are cut, are edited in the middle, are rebuilt or resent.
 */
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createChainMemo, createConversationMemo } from '../../src/compile/conversation.js';
import { createObservationMemo, hostToolOutputs } from '../../src/compile/observations.js';
import { compileSettings, reduceRequest } from '../../src/compile/reduce-request.js';
import { sessionStateFactory, type SessionState } from '../../src/compile/session.js';
import { segmentSteps } from '../../src/compile/steps.js';
import type { ItemInfo } from '../../src/model/types.js';
import { createStep, type ProviderRequest } from '../../src/step.js';
import { requestStore } from '../../src/vault/scoped-reads.js';
import { createVault } from '../../src/vault/index.js';
import { clone, fileFixture, readCall, readOutput } from './helpers.js';

const { dir, counter } = fileFixture('walk-carries');

const info: fc.Arbitrary<ItemInfo> = fc.record({
  role: fc.constantFrom('system', 'user', 'assistant', 'tool'),
  userText: fc.boolean(),
}) as fc.Arbitrary<ItemInfo>;

type Op =
  | { readonly kind: 'grow' | 'ask' | 'think'; readonly lines: number }
  | { readonly kind: 'cut'; readonly pairs: number }
  | { readonly kind: 'edit'; readonly at: number }
  | { readonly kind: 'rebuild' | 'resend' | 'recent' };

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('grow' as const), lines: fc.constantFrom(0, 3, 80) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constantFrom('ask' as const, 'think' as const), lines: fc.nat(1) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('cut' as const), pairs: fc.integer({ min: 1, max: 12 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('edit' as const), at: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constantFrom('rebuild' as const, 'resend' as const) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('recent' as const) }) },
);

/** A session's state with every carry of this file dropped: the next request walks its whole history. */
function forget(state: SessionState): void {
  delete state.memo.steps;
  delete state.memo.named;
  Object.assign(state, { observations: createObservationMemo(), chain: createChainMemo() });
}

let run = 0;

/** Each request compiled by a session that carries and by one that forgets first: the same request and decisions. */
async function compare(ops: readonly Op[]): Promise<void> {
  const vault = await createVault({ path: join(dir, `walks-${run++}.sqlite3`) });
  const options = { vault, counter };
  const settings = [compileSettings(options), compileSettings({ ...options, inlineRecentTurns: 30 })];
  let recent = 0;
  const sessions = ['carried', 'fresh'].map((id) => ({
    state: sessionStateFactory(options)({ sessionId: id }),
    memo: createConversationMemo(requestStore(vault), id, 1),
    id,
  }));
  let messages: unknown[] = [
    { role: 'system', content: 'You are a coding agent.' },
    { role: 'user', content: 'Fix the parser.' },
  ];
  let next = 0;
  for (const [t, o] of ops.entries()) {
    if (o.kind === 'grow') {
      const id = `f${next++}`;
      messages.push(readCall(id), readOutput(id, o.lines));
    } else if (o.kind === 'ask') messages.push({ role: 'user', content: `And test ${next++}.` });
    else if (o.kind === 'think') messages.push({ role: 'assistant', content: `Thinking ${next++}.` });
    else if (o.kind === 'cut') messages = messages.slice(0, Math.max(2, messages.length - 2 * o.pairs));
    else if (o.kind === 'edit' && messages.length > 3) {
      const at = 2 + (o.at % (messages.length - 2));
      messages = messages.slice();
      // An odd edit makes the item a user message: the steps of the history change too.
      const edited = o.at % 2 === 0 ? (messages[at] as object) : { role: 'user' };
      messages[at] = { ...edited, content: `edited ${next++}\n`.repeat(90) };
    } else if (o.kind === 'rebuild') messages = clone(messages);
    else if (o.kind === 'recent') recent = 1 - recent;
    const out: string[] = [];
    for (const s of sessions) {
      if (s.id === 'fresh') forget(s.state);
      const request: ProviderRequest = { model: 'gpt-4o', messages: messages.slice() };
      const step = createStep(request, { sessionId: 'walks', requestId: `r${t}` });
      const seen = s.state.requests.recognise(request);
      const r = await reduceRequest(step, s.state, seen, s.memo, settings[recent]!);
      const outputs = seen.view.slots.filter((slot) => slot.kind === 'tool_output');
      expect(hostToolOutputs(seen.view, s.state.observations)).toEqual(outputs);
      out.push(JSON.stringify([r?.value ?? request, r?.decisions]));
    }
    expect(out[0]).toBe(out[1]);
  }
  await vault.close();
}

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
    const ops: Op[] = [];
    for (let t = 0; t < 30; t++) ops.push({ kind: t % 7 === 3 ? 'ask' : t % 5 === 4 ? 'think' : 'grow', lines: 80 });
    ops.push({ kind: 'edit', at: 5 }, { kind: 'grow', lines: 80 }, { kind: 'rebuild' }, { kind: 'recent' });
    ops.push({ kind: 'edit', at: 8 }, { kind: 'grow', lines: 80 }, { kind: 'edit', at: 11 }, { kind: 'resend' });
    for (let t = 0; t < 6; t++) ops.push({ kind: 'grow', lines: 80 }, { kind: 'resend' });
    ops.push({ kind: 'cut', pairs: 6 }, { kind: 'grow', lines: 80 }, { kind: 'recent' }, { kind: 'grow', lines: 80 });
    await compare(ops);
  });

  it('compiles the same requests over histories grown, cut, edited in the middle, rebuilt and resent', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 20, maxLength: 40 }), async (ops) => {
        await compare(ops);
      }),
      { numRuns: 6 },
    );
  });
});
