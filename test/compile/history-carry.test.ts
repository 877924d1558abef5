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
import type { SettledRun } from '../../src/compile/history.js';
import { createVault } from '../../src/vault/index.js';
import { carryOp, compareCarried, type CarryOp } from './carry-sessions.js';
import { fileFixture, readOutput } from './helpers.js';

const { dir, counter } = fileFixture('history-carry');

let run = 0;

/** What a settled run decided, by key (the carried and the fresh run hold other fact objects). */
const lists = (r: SettledRun | undefined) =>
  r && { ends: r.ends, holes: r.holes, applied: r.applied.map((t) => t.key), at: r.appliedAt, shown: r.shown };

/** Each request compiled by a session that carries and by one whose carried run is dropped first: the same; how many requests carried a run. */
async function compare(ops: readonly CarryOp[]): Promise<number> {
  let carried = 0;
  await compareCarried(ops, {
    vault: await createVault({ path: join(dir, `carry-${run++}.sqlite3`) }),
    counter,
    // The fresh session renders from scratch and collects the named artifacts anew as well.
    forget: (state) => {
      for (const k of ['settledRun', 'renderings', 'named'] as const) delete state.memo[k];
    },
    // A tool output in the middle gets other content (a new object at the same place).
    edit: (messages, at, next) => {
      const k = 3 + 2 * (at % ((messages.length - 2) / 2));
      const edited = messages.slice();
      edited[k] = {
        ...readOutput(`e${next}`, 80),
        tool_call_id: (messages[k] as { tool_call_id: string }).tool_call_id,
      };
      return edited;
    },
    after: (a, b) => {
      if ((a.memo.settledRun?.ends[1] ?? 0) > 0) carried++;
      // The lists the next request carries are the ones deciding every output again gives (when it planned).
      if (b.memo.settledRun !== undefined) expect(lists(a.memo.settledRun)).toEqual(lists(b.memo.settledRun));
    },
  });
  return carried;
}

describe('the settled run a history plan carries', () => {
  it('gives the request deciding every output again gives, as the history grows and is rewritten', async () => {
    const ops: CarryOp[] = [];
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
      fc.asyncProperty(fc.array(carryOp(), { minLength: 20, maxLength: 40 }), async (ops) => {
        await compare(ops);
      }),
      { numRuns: 6 },
    );
  });
});
