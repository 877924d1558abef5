/**
 * The working set (src/compile/working-set.ts): idle turns per old output, decided from the
 * request alone, and the expected-recovery term of the rewrite rule (src/compile/economics.ts).
 */
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { chooseBatch } from '../../src/compile/economics.js';
import { expectedRecovery, returnChance, workingSetIdleLimit } from '../../src/compile/history.js';
import { createObservationMemo, hostToolOutputs } from '../../src/compile/observations.js';
import { sessionStateFactory } from '../../src/compile/session.js';
import { referenceWords, idleTurns, idleTurnsOnce, walkedItems } from '../../src/compile/working-set.js';
import { PRICING_PROFILES } from '../../src/config/pricing.js';
import { readRequest } from '../../src/model/index.js';
import { createVault } from '../../src/vault/index.js';
import { fileFixture } from './helpers.js';
import { parallelTurn } from '../support/parallel-turn.js';

const { dir, counter } = fileFixture('working-set');
const vault = await createVault({ path: join(dir, 'ws.sqlite3') });
afterAll(() => vault.close());

type Obj = Record<string, unknown>;
const call = (id: string, command: string, text = ''): Obj => ({
  role: 'assistant',
  content: text,
  tool_calls: [{ id, type: 'function', function: { name: 'bash', arguments: JSON.stringify({ command }) } }],
});
const out = (id: string, content: string): Obj => ({ role: 'tool', tool_call_id: id, content });
const lines = (prefix: string, n: number): string =>
  Array.from({ length: n }, (_, i) => `${prefix} line ${i} of the file`).join('\n');

function idleOf(messages: Obj[]): number[] {
  const view = readRequest({ model: 'm', messages });
  const state = sessionStateFactory({ vault, counter })({ sessionId: 's' });
  return idleTurns(state, view, hostToolOutputs(view, state.observations));
}

describe('idleTurns', () => {
  const base: Obj[] = [
    { role: 'system', content: 'agent' },
    { role: 'user', content: 'fix the parser' },
    call('c1', 'cat src/parser.py'),
    out('c1', `def parse_config(text):\n${lines('parser', 20)}`),
    call('c2', 'ls tests'),
    out('c2', 'test_alpha.py\ntest_beta.py'),
    call('c3', 'echo one'),
    out('c3', 'one'),
    call('c4', 'echo two'),
    out('c4', 'two'),
  ];

  it('counts the turns since an output arrived when nothing refers to it', () => {
    expect(idleOf(base)).toEqual([3, 2, 1, 0]);
  });

  it('a later text or action naming an identifier of an output keeps it in the working set', () => {
    const named = [...base, call('c5', 'echo three', 'parse_config is wrong'), out('c5', 'three')];
    expect(idleOf(named)).toEqual([0, 3, 2, 1, 0]);
    // Words are whole runs: tests/test_beta.py does not name test_beta.py.
    const path = [...base, call('c5', 'pytest tests/test_beta.py')];
    expect(idleOf(path)).toEqual([4, 3, 2, 1]);
    const exact = [...base, call('c5', 'pytest test_beta.py')];
    expect(idleOf(exact)).toEqual([4, 0, 2, 1]);
  });

  it('a later output that shows the same lines again supersedes the earlier one', () => {
    const again = [
      ...base,
      call('c5', 'cat src/parser.py'),
      out('c5', `def parse_config(text):\n${lines('parser', 20)}`),
    ];
    const idle = idleOf(again);
    expect(idle[0]).toBeGreaterThan(1000);
    expect(idle.slice(1)).toEqual([3, 2, 1, 0]);
  });

  it('a word many outputs hold (a shared root path) refers to none of them', () => {
    const shared = Array.from({ length: 5 }, (_, k) => [call(`s${k}`, `ls ${k}`), out(`s${k}`, `/repo_root\nx${k}`)]);
    const messages = [{ role: 'user', content: 'go' }, ...shared.flat(), call('z', 'cd /repo_root')];
    expect(idleOf(messages)).toEqual([5, 4, 3, 2, 1]);
  });

  it('a plain word names an output as well as an identifier does, while few outputs hold it', () => {
    const listing = [...base, call('c5', 'cd /proc'), out('c5', 'ok'), call('c6', 'echo x')];
    const withProc = listing.map((m, j) => (j === 5 ? out('c2', 'test_alpha.py\ntest_beta.py\nproc') : m));
    expect(idleOf(withProc)[1]).toBe(1);
  });

  it('takes words of four chars or more, trailing punctuation dropped', () => {
    expect([...referenceWords('see src/app/x.py. and parse_config, getValue or 42.')]).toEqual([
      'src/app/x.py',
      'parse_config',
      'getValue',
    ]);
  });
});

/**
 * A session whose assistant messages carry several calls, each result arriving in its own order:
 * chat tool messages, or one Anthropic user message of tool_result blocks. Lines and words come
 * from small pools, so outputs show each other's lines again and texts name their words.
 */
const WORDS = ['parse_config', 'src/app/x.py', 'getValue', 'proc_table', 'tests/test_beta.py', 'repo_root'];
const turnArb = fc.record({
  calls: fc.integer({ min: 1, max: 4 }),
  order: fc.array(fc.nat(), { minLength: 4, maxLength: 4 }),
  lines: fc.array(fc.array(fc.integer({ min: 0, max: 11 }), { minLength: 0, maxLength: 6 }), {
    minLength: 4,
    maxLength: 4,
  }),
  said: fc.array(fc.integer({ min: 0, max: WORDS.length - 1 }), { maxLength: 2 }),
});
type Turn = typeof turnArb extends fc.Arbitrary<infer T> ? T : never;

/** The messages of `turns` and the index after each turn's results (where a request is sent). */
function parallelSession(turns: readonly Turn[], anthropic: boolean): { messages: Obj[]; ends: number[] } {
  const messages: Obj[] = [{ role: 'user', content: 'fix the parser' }];
  const ends: number[] = [];
  turns.forEach((t, n) => {
    const ids = Array.from({ length: t.calls }, (_, j) => `t${n}c${j}`);
    const text = `step ${n}: ${t.said.map((w) => WORDS[w]).join(' ')}`;
    const order = ids.map((id, j) => ({ id, j, key: t.order[j]! })).sort((a, b) => a.key - b.key || a.j - b.j);
    const content = (j: number): string =>
      t.lines[j]!.map((l) => `${WORDS[l % WORDS.length]} line ${l}`).join('\n') || 'ok';
    const calls = ids.map((id, j) => ({ id, name: 'bash', input: { command: `cat f${n}_${j}` } }));
    messages.push(
      ...parallelTurn(
        anthropic,
        text,
        calls,
        order.map(({ id, j }) => ({ id, content: content(j) })),
      ),
    );
    ends.push(messages.length);
  });
  return { messages, ends };
}

describe('idleTurns on a growing session', () => {
  const pool = () => sessionStateFactory({ vault, counter });
  const idleIn = (state: ReturnType<ReturnType<typeof pool>>, messages: readonly Obj[]): number[] => {
    const view = readRequest({ model: 'm', messages });
    return idleTurns(state, view, hostToolOutputs(view, state.observations));
  };

  const scanned = (messages: readonly Obj[]): number[] => {
    const view = readRequest({ model: 'm', messages });
    return idleTurnsOnce(view, hostToolOutputs(view, createObservationMemo()));
  };

  it('answers as a scan of the whole history for parallel calls whose results arrive in any order, retries, rebuilt copies and edited histories', () => {
    fc.assert(
      fc.property(
        fc.array(turnArb, { minLength: 1, maxLength: 8 }),
        fc.boolean(),
        fc.array(fc.constantFrom('next', 'retry', 'rebuilt', 'earlier', 'edited'), { minLength: 8, maxLength: 8 }),
        (turns, anthropic, moves) => {
          const { messages, ends } = parallelSession(turns, anthropic);
          const session = pool()({ sessionId: 'carried' });
          ends.forEach((end, n) => {
            const move = moves[n % moves.length]!;
            const upTo = move === 'earlier' && n > 0 ? ends[n - 1]! : end;
            const request = move === 'rebuilt' ? structuredClone(messages.slice(0, upTo)) : messages.slice(0, upTo);
            // The host changed an earlier output (its first): the shared history ends before it.
            const edited = request.findIndex((m) => m['role'] !== 'assistant' && m !== request[0]);
            if (move === 'edited' && edited >= 0)
              request[edited] = anthropic
                ? { role: 'user', content: 'parse_config line 1\nrepo_root line 5' }
                : { ...request[edited], content: 'parse_config line 1\nrepo_root line 5' };
            const expected = scanned(request);
            expect(idleIn(session, request)).toEqual(expected);
            if (move === 'retry') expect(idleIn(session, request)).toEqual(expected);
            expect(idleIn(pool()({ sessionId: 'fresh' }), request)).toEqual(expected);
          });
        },
      ),
      { numRuns: 150 },
    );
  });

  it("walks only a request's new items when it extends the previous one", () => {
    const turns: Turn[] = Array.from({ length: 6 }, (_, n) => ({
      calls: 3,
      order: [2, 0, 1, 3],
      lines: [[n], [n + 1, 3], [n + 2], []],
      said: [n % WORDS.length],
    }));
    const { messages, ends } = parallelSession(turns, false);
    const session = pool()({ sessionId: 's' });
    for (const end of ends) idleIn(session, messages.slice(0, end));
    // Each item once (1 + 4 per turn), not the whole history again per request.
    expect(walkedItems(session)).toBe(messages.length);
    // A copy of the history (new objects) is walked whole.
    idleIn(session, structuredClone(messages));
    expect(walkedItems(session)).toBe(2 * messages.length);
  });
});

describe('the rewrite rule with expected recoveries', () => {
  const q = {
    size: 60_000,
    cachedEnd: 55_000,
    requestsAhead: 10,
    pricing: PRICING_PROFILES.openai,
    candidates: [{ position: 50_000, saved: 4_500 }],
  };

  it('takes a batch whose saving exceeds the cache it breaks, and refuses it once the likely recoveries outweigh it', () => {
    const plain = chooseBatch(q);
    expect(plain).toBeDefined();
    const risky = expectedRecovery(PRICING_PROFILES.openai, 60_000, 5_000, 0);
    expect(risky).toBeGreaterThan(plain!.net);
    expect(chooseBatch({ ...q, candidates: [{ ...q.candidates[0]!, recovery: risky }] })).toBeUndefined();
    // Left for long, the same output is unlikely to be needed again: the digest pays.
    const idle = expectedRecovery(PRICING_PROFILES.openai, 60_000, 5_000, 50);
    expect(chooseBatch({ ...q, candidates: [{ ...q.candidates[0]!, recovery: idle }] })).toBeDefined();
  });
});

describe("the session's own past decides how readily it digests", () => {
  const past = (rewritten: number, returned: number) => ({
    rewritten: new Set(Array.from({ length: rewritten }, (_, i) => `k${i}`)),
    returned: new Set(Array.from({ length: returned }, (_, i) => `k${i}`)),
  });
  const q = {
    size: 60_000,
    cachedEnd: 55_000,
    requestsAhead: 10,
    pricing: PRICING_PROFILES.openai,
    candidates: [{ position: 50_000, saved: 4_500 }],
  };

  it('without a record the idle turns alone set the chance of coming back', () => {
    expect(returnChance(3)).toBe(0.25);
    expect(returnChance(3, past(0, 0))).toBe(0.25);
  });

  it('a session that never came back to its digests is expected to come back less, one that always did more', () => {
    expect(returnChance(1, past(12, 0))).toBeLessThan(returnChance(1));
    expect(returnChance(1, past(12, 12))).toBeGreaterThan(0.8);
    // The same digest: refused for a session that keeps coming back, taken for one that does not.
    const keeps = expectedRecovery(PRICING_PROFILES.openai, 60_000, 5_000, 2, past(12, 11));
    const leaves = expectedRecovery(PRICING_PROFILES.openai, 60_000, 5_000, 2, past(12, 0));
    expect(chooseBatch({ ...q, candidates: [{ ...q.candidates[0]!, recovery: keeps }] })).toBeUndefined();
    expect(chooseBatch({ ...q, candidates: [{ ...q.candidates[0]!, recovery: leaves }] })).toBeDefined();
  });

  it('the working set waits longer in a session that came back to what it let go, less in one that never did', () => {
    expect(workingSetIdleLimit(past(2, 2), 2)).toBe(2); // too short a record
    expect(workingSetIdleLimit(past(10, 1), 2)).toBe(2);
    expect(workingSetIdleLimit(past(10, 0), 2)).toBe(1); // a long record of never coming back
    expect(workingSetIdleLimit(past(10, 0), 1)).toBe(1);
    expect(workingSetIdleLimit(past(10, 6), 2)).toBe(4);
    expect(workingSetIdleLimit(past(10, 9), 2)).toBe(4);
  });

  it('from the lean default, a session that came back to a fifth of what it let go waits a turn longer', () => {
    expect(workingSetIdleLimit(past(3, 3))).toBe(1); // too short a record: the default
    expect(workingSetIdleLimit(past(10, 1))).toBe(1);
    expect(workingSetIdleLimit(past(10, 2))).toBe(2);
    expect(workingSetIdleLimit(past(10, 4))).toBe(2);
    expect(workingSetIdleLimit(past(10, 5))).toBe(3);
  });
});
