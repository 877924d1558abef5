/**
 * A request's history plan visits what can still change, not its whole history
 * (src/compile/history.ts): an output rewritten earlier, or too small to be rewritten, keeps its
 * decision while the host sends the same items again, so a long session's request visits about as
 * many past outputs as a short one's. Counts, not timing.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createConversationMemo } from '../../src/compile/conversation.js';
import { visitedOutputs } from '../../src/compile/history.js';
import { compileSettings, reduceRequest } from '../../src/compile/reduce-request.js';
import { sessionStateFactory } from '../../src/compile/session.js';
import { createStep, type ProviderRequest } from '../../src/step.js';
import { requestStore } from '../../src/vault/scoped-reads.js';
import { createVault } from '../../src/vault/index.js';
import { fileFixture, readCall, readOutput } from './helpers.js';

const { dir, counter } = fileFixture('history-visits');

describe('history plans of a growing session', () => {
  it('visit a constant number of past outputs per request as the history grows', async () => {
    const vault = await createVault({ path: join(dir, 'visits.sqlite3') });
    const options = { vault, counter };
    const state = sessionStateFactory(options)({ sessionId: 's' });
    const memo = createConversationMemo(requestStore(vault), 's', 1);
    const settings = compileSettings(options);
    const messages: unknown[] = [
      { role: 'system', content: 'You are a coding agent.' },
      { role: 'user', content: 'Fix the parser.' },
    ];
    const perRequest: number[] = [];
    // Receipts looked up per request: the previous request's named renderings keep theirs.
    const lookups: number[] = [];
    const get = state.targetReceipts.get.bind(state.targetReceipts);
    state.targetReceipts.get = (key) => (lookups[lookups.length - 1]!++, get(key));
    let rewritten = 0;
    for (let t = 0; t < 60; t++) {
      const id = `f${t}`;
      // Mostly outputs worth a digest, every third one too small for any rewrite.
      messages.push(readCall(id), readOutput(id, t % 3 === 0 ? 0 : 80));
      // The host reuses its objects: every request is the same items, sliced.
      const request: ProviderRequest = { model: 'gpt-4o', messages: messages.slice() };
      const step = createStep(request, { sessionId: 's', requestId: `r${t}` });
      const before = visitedOutputs(state);
      lookups.push(0);
      const out = await reduceRequest(step, state, state.requests.recognise(request), memo, settings);
      perRequest.push(visitedOutputs(state) - before);
      if (out !== undefined) rewritten = JSON.stringify(out.value).split('a_').length - 1;
      if (t < 59) continue;
      // The same request again, the carried receipts dropped: the same result.
      delete state.memo.receipted;
      const again = await reduceRequest(step, state, state.requests.recognise(request), memo, settings);
      expect(JSON.stringify(again?.value)).toBe(JSON.stringify(out?.value));
    }
    await vault.close();
    // The history was rewritten (else nothing would settle), and the newest requests visit as few
    // outputs as requests a third as long: the recent, unsettled ones.
    expect(rewritten).toBeGreaterThan(10);
    const late = Math.max(...perRequest.slice(40));
    expect(late).toBeLessThanOrEqual(Math.max(...perRequest.slice(15, 25)));
    expect(late).toBeLessThan(10);
    expect(Math.max(...lookups.slice(40, -1))).toBeLessThanOrEqual(2);
  });
});
