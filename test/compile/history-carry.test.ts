/**
 * A history plan carries the settled decisions of the session's previous request
 * (src/compile/history.ts `SettledRun`) and decides again only the unsettled outputs: the request
 * it compiles is the one deciding every output again gives, over histories that grow, are cut, are
 * edited in the middle, are rebuilt or resent. So are its renderings (src/compile/apply.ts
 * renderItems) and the artifacts its decision names (reduceRequest), carried the same way.
 */
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createConversationMemo } from '../../src/compile/conversation.js';
import type { SettledRun } from '../../src/compile/history.js';
import { compileSettings, reduceRequest } from '../../src/compile/reduce-request.js';
import { sessionStateFactory } from '../../src/compile/session.js';
import { createStep, type ProviderRequest } from '../../src/step.js';
import { requestStore } from '../../src/vault/scoped-reads.js';
import { createVault } from '../../src/vault/index.js';
import { clone, fileFixture, readCall, readOutput } from './helpers.js';

const { dir, counter } = fileFixture('history-carry');

type Op =
  | { readonly kind: 'grow'; readonly lines: number }
  | { readonly kind: 'cut'; readonly pairs: number }
  | { readonly kind: 'edit'; readonly at: number }
  | { readonly kind: 'rebuild' | 'resend' | 'recent' };

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('grow' as const), lines: fc.constantFrom(0, 3, 80) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('cut' as const), pairs: fc.integer({ min: 1, max: 12 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('edit' as const), at: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constantFrom('rebuild' as const, 'resend' as const) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('recent' as const) }) },
);

let run = 0;

/** What a settled run decided, by key (the carried and the fresh run hold other fact objects). */
const lists = (r: SettledRun | undefined) =>
  r && { ends: r.ends, holes: r.holes, applied: r.applied.map((t) => t.key), at: r.appliedAt, shown: r.shown };

/** Each request compiled by a session that carries and by one whose carried run is dropped first: the same. */
async function compare(ops: readonly Op[]): Promise<number> {
  const vault = await createVault({ path: join(dir, `carry-${run++}.sqlite3`) });
  const options = { vault, counter };
  // 'recent' switches between keeping the newest turn inline and the newest thirty.
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
  let carried = 0;
  for (const [t, o] of ops.entries()) {
    if (o.kind === 'grow') {
      const id = `f${next++}`;
      messages.push(readCall(id), readOutput(id, o.lines));
    } else if (o.kind === 'cut') messages = messages.slice(0, Math.max(2, messages.length - 2 * o.pairs));
    else if (o.kind === 'edit' && messages.length > 3) {
      // A tool output in the middle gets other content (a new object at the same place).
      const pairs = (messages.length - 2) / 2;
      const at = 3 + 2 * (o.at % pairs);
      const id = `e${next++}`;
      messages = messages.slice();
      messages[at] = { ...readOutput(id, 80), tool_call_id: (messages[at] as { tool_call_id: string }).tool_call_id };
    } else if (o.kind === 'rebuild') messages = clone(messages);
    else if (o.kind === 'recent') recent = 1 - recent;
    const out: string[] = [];
    for (const s of sessions) {
      // The fresh session renders from scratch and collects the named artifacts anew as well.
      if (s.id === 'fresh') for (const k of ['settledRun', 'renderings', 'named'] as const) delete s.state.memo[k];
      else if ((s.state.memo.settledRun?.ends[1] ?? 0) > 0) carried++;
      const request: ProviderRequest = { model: 'gpt-4o', messages: messages.slice() };
      const step = createStep(request, { sessionId: s.id, requestId: `r${t}` });
      const r = await reduceRequest(step, s.state, s.state.requests.recognise(request), s.memo, settings[recent]!);
      out.push(JSON.stringify([r?.value ?? request, r?.decisions]));
    }
    expect(out[0]).toBe(out[1]);
    // The lists the next request carries are the ones deciding every output again gives (when it planned).
    const [a, b] = sessions.map(({ state }) => lists(state.memo.settledRun));
    if (b !== undefined) expect(a).toEqual(b);
  }
  await vault.close();
  return carried;
}

describe('the settled run a history plan carries', () => {
  it('gives the request deciding every output again gives, as the history grows and is rewritten', async () => {
    const ops: Op[] = [];
    for (let t = 0; t < 40; t++) ops.push({ kind: 'grow', lines: t % 3 === 0 ? 0 : 80 });
    ops.push({ kind: 'edit', at: 5 }, { kind: 'grow', lines: 80 }, { kind: 'rebuild' });
    for (let t = 0; t < 6; t++) ops.push({ kind: 'grow', lines: 80 });
    // More newest turns kept inline: rewrites among them are shown again, then rewritten again.
    ops.push({ kind: 'recent' }, { kind: 'resend' }, { kind: 'grow', lines: 80 }, { kind: 'recent' });
    // Small outputs settle too: the run reaches the newest turn; then more, then fewer turns kept inline.
    for (let t = 0; t < 12; t++) ops.push({ kind: 'grow', lines: 0 });
    ops.push({ kind: 'recent' }, { kind: 'resend' }, { kind: 'recent' }, { kind: 'resend' });
    ops.push({ kind: 'grow', lines: 80 }, { kind: 'cut', pairs: 2 });
    // Cut back past the newest turns: outputs rewritten before are among them again (inline).
    for (const pairs of [6, 6]) ops.push({ kind: 'cut', pairs }, { kind: 'resend' }, { kind: 'grow', lines: 80 });
    // The carried run was taken (its rewrites settled), not only checked.
    expect(await compare(ops)).toBeGreaterThan(20);
  });

  it('gives the same requests over histories grown, cut, edited in the middle, rebuilt and resent', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 20, maxLength: 40 }), async (ops) => {
        await compare(ops);
      }),
      { numRuns: 6 },
    );
  });
});
