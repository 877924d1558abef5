/**
 * The driver the carry tests share: one request list, grown and rewritten op by op, compiled by a
 * session that carries its walks and by one that forgets them before each request. Both must
 * compile the same request with the same decisions.
 */
import fc from 'fast-check';
import { expect } from 'vitest';
import { createConversationMemo } from '../../src/compile/conversation.js';
import { compileSettings, reduceRequest } from '../../src/compile/reduce-request.js';
import { sessionStateFactory, type SessionState } from '../../src/compile/session.js';
import type { Recognised } from '../../src/model/prefix.js';
import type { TokenCounter } from '../../src/measure/types.js';
import { createStep, type ProviderRequest } from '../../src/step.js';
import { requestStore } from '../../src/vault/scoped-reads.js';
import type { Vault } from '../../src/vault/types.js';
import { clone, readCall, readOutput } from './helpers.js';

export type CarryOp =
  | { readonly kind: 'grow' | 'ask' | 'think'; readonly lines: number }
  | { readonly kind: 'cut'; readonly pairs: number }
  | { readonly kind: 'edit'; readonly at: number }
  | { readonly kind: 'rebuild' | 'resend' | 'recent' };

/** Ops that grow (a read and its output of 0, 3 or 80 lines), cut, edit, rebuild, resend and toggle the inline turns; `talk`: user asks and assistant-only turns too. */
export const carryOp = (talk = false): fc.Arbitrary<CarryOp> =>
  fc.oneof(
    { weight: 6, arbitrary: fc.record({ kind: fc.constant('grow' as const), lines: fc.constantFrom(0, 3, 80) }) },
    {
      weight: talk ? 1 : 0,
      arbitrary: fc.record({ kind: fc.constantFrom('ask' as const, 'think' as const), lines: fc.nat(1) }),
    },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('cut' as const), pairs: fc.integer({ min: 1, max: 12 }) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('edit' as const), at: fc.nat() }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constantFrom('rebuild' as const, 'resend' as const) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('recent' as const) }) },
  );

export interface CarryCompare {
  readonly vault: Vault;
  readonly counter: TokenCounter;
  /** Drop the carries under test from the fresh session's state (before each of its requests). */
  forget(state: SessionState): void;
  /** The list after an `edit` op (`next`: a fresh number for new content). */
  edit(messages: readonly unknown[], at: number, next: number): unknown[];
  /** Checks after each session's request (both sessions). */
  request?(state: SessionState, seen: Recognised): void;
  /** Checks after both sessions compiled a request. */
  after?(carried: SessionState, fresh: SessionState): void;
}

/** Compile `ops`' requests with both sessions and compare them (the vault is closed after). */
export async function compareCarried(ops: readonly CarryOp[], c: CarryCompare): Promise<void> {
  const options = { vault: c.vault, counter: c.counter };
  // 'recent' switches between keeping the newest turn inline and the newest thirty.
  const settings = [compileSettings(options), compileSettings({ ...options, inlineRecentTurns: 30 })];
  let recent = 0;
  const sessions = ['carried', 'fresh'].map((id) => ({
    state: sessionStateFactory(options)({ sessionId: id }),
    memo: createConversationMemo(requestStore(c.vault), id, 1),
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
    else if (o.kind === 'edit' && messages.length > 3) messages = c.edit(messages, o.at, next++);
    else if (o.kind === 'rebuild') messages = clone(messages);
    else if (o.kind === 'recent') recent = 1 - recent;
    const out: string[] = [];
    for (const s of sessions) {
      if (s.id === 'fresh') c.forget(s.state);
      const request: ProviderRequest = { model: 'gpt-4o', messages: messages.slice() };
      const step = createStep(request, { sessionId: s.id, requestId: `r${t}` });
      const seen = s.state.requests.recognise(request);
      const r = await reduceRequest(step, s.state, seen, s.memo, settings[recent]!);
      c.request?.(s.state, seen);
      out.push(JSON.stringify([r?.value ?? request, r?.decisions]));
    }
    expect(out[0]).toBe(out[1]);
    c.after?.(sessions[0]!.state, sessions[1]!.state);
  }
  await c.vault.close();
}
