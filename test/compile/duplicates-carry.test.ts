/**
 * planDuplicates on a request that extends the previous one (src/compile/duplicates.ts) plans its
 * new outputs and the earlier copies they make older, not its whole history, and plans exactly
 * what a session seeing the request first plans. Counts, not timing.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { planDuplicates, type DuplicateOptions } from '../../src/compile/duplicates.js';
import { hostToolOutputs } from '../../src/compile/observations.js';
import { sessionStateFactory, type SessionState } from '../../src/compile/session.js';
import { createVault } from '../../src/vault/index.js';
import { fileFixture, readCall, readOutput } from './helpers.js';

const { dir, counter } = fileFixture('duplicates-carry');

describe('planDuplicates over a growing session', () => {
  it('plans the new outputs and the copies they make older, as a fresh session would', async () => {
    const vault = await createVault({ path: join(dir, 'dup.sqlite3') });
    const newState = sessionStateFactory({ vault, counter });
    const carried = newState({ sessionId: 's' });
    const messages: unknown[] = [
      { role: 'system', content: 'You are a coding agent.' },
      { role: 'user', content: 'Fix the parser.' },
    ];
    const plan = async (state: SessionState, request: { messages: unknown[] }, seenItems: number) => {
      const view = state.requests.recognise(request).view;
      const o: DuplicateOptions = {
        sessionId: 's',
        minChars: 100,
        maxChars: 1_000_000,
        maxInlineChars: 1500,
        viewChars: 600,
        isNew: (i) => i >= seenItems,
        wasDuplicate: () => false,
      };
      const { planned } = await planDuplicates(state, view, hostToolOutputs(view, state.observations), o);
      return planned.map((p) => `${p.slot.item} ${p.render} ${'text' in p ? p.text : ''}`);
    };
    const decided: number[] = [];
    for (let t = 0; t < 40; t++) {
      const seenItems = messages.length;
      // Every fifth output repeats the first one's text: the earlier copies become older.
      const text = t % 5 === 4 ? 'f0' : `f${t}`;
      messages.push(readCall(`f${t}`), { ...readOutput(text, t % 2 === 0 ? 60 : 20), tool_call_id: `f${t}` });
      const request = { model: 'gpt-4o', messages: messages.slice() };
      const got = await plan(carried, request, seenItems);
      decided.push(carried.memo.dedupePlan!.decided);
      expect(got).toEqual(await plan(newState({ sessionId: `fresh${t}` }), request, seenItems));
    }
    await vault.close();
    // The new output, and the copies of the repeated text (8 at most): never the whole history.
    expect(Math.max(...decided.slice(30))).toBeLessThanOrEqual(9);
    expect(decided.at(-1)).toBeLessThan(40 / 2);
  });
});
