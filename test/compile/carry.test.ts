/**
 * Carried plans (src/compile/carry.ts) must not change a single output byte: the request stages
 * with carrying on are compared with the full path (carrying off) on generated growing sessions,
 * with the host reusing its objects and rebuilding them, also when the host edits an earlier item,
 * retries a request, when a delivery finds artifacts gone, and when the session's state is
 * re-created (its lane evicted).
 */
import { join } from 'node:path';
import { Subject } from 'rxjs';
import { describe, expect } from 'vitest';
import { fc, it, test } from '@fast-check/vitest';
import { compileRequest } from '../../operators/compile-request.js';
import { collapseDuplicates } from '../../operators/collapse-duplicates.js';
import type { CarriedStage } from '../../src/compile/carry.js';
import { createConversationMemo } from '../../src/compile/conversation.js';
import { planHistory } from '../../src/compile/history.js';
import { hostToolOutputs } from '../../src/compile/observations.js';
import { createSessionPool } from '../../src/compile/session.js';
import { PRICING_PROFILES } from '../../src/config/pricing.js';
import { createTerminator } from '../../src/runtime.js';
import { createStep, type ProviderRequest, type Step } from '../../src/step.js';
import type { PricingProfile } from '../../src/config/pricing.js';
import { TOOL_NAMES, growingSession, type RequestOptions } from '../../src/testing/index.js';
import { createVault } from '../../src/vault/index.js';
import type { RequestView, Slot } from '../../src/model/types.js';
import type { StoreScope, Vault } from '../../src/vault/types.js';
import { clone, fileFixture, listKey, readCall, readOutput, reusing } from './helpers.js';
const { dir, counter } = fileFixture('carry');

type Obj = Record<string, unknown>;

/** An assistant turn reading `<id>.ts`, and that file's 30-line output. */
const call = readCall;
const out = (id: string): Obj => readOutput(id, 30);

// Sessions that reach bounded views, duplicates and digests at these thresholds.
const shapes: RequestOptions = { maxTurns: 7, sizes: ['tiny', 'medium'], tools: [...TOOL_NAMES, 'weird tool]\n'] };

/** How a generated session is varied: an earlier item edited from a request on, a request sent twice, artifacts lost. */
interface Variation {
  readonly edit: readonly [at: number, item: number] | undefined;
  readonly retry: number | undefined;
  /** After request `a`, the host sends the shorter request `b` and then `a` again (a history sent again). */
  readonly rewind: readonly [a: number, b: number] | undefined;
  /** compileRequest's fixed-block policy (0: the cache-economic rule). */
  readonly blockTurns: number;
  /** The request whose deliveries find every artifact gone (until it is stored again). */
  readonly lose: number | undefined;
  /** The request whose deliveries fail (the vault throws: the stages pass the request through). */
  readonly fail: number | undefined;
  readonly rebuilt: boolean;
}

const variation: fc.Arbitrary<Variation> = fc.record({
  edit: fc.option(fc.tuple(fc.nat(), fc.nat()), { nil: undefined }),
  retry: fc.option(fc.nat(), { nil: undefined }),
  rewind: fc.option(fc.tuple(fc.nat(), fc.nat()), { nil: undefined }),
  blockTurns: fc.constantFrom(0, 1, 2),
  lose: fc.option(fc.nat(), { nil: undefined }),
  fail: fc.option(fc.nat(), { nil: undefined }),
  rebuilt: fc.boolean(),
});

/** The requests of `session` as the variation sends them. */
function vary(session: readonly ProviderRequest[], v: Variation): ProviderRequest[] {
  let requests = reusing(session);
  if (v.edit !== undefined) {
    const at = v.edit[0] % requests.length;
    const list = requests[at]![listKey(requests[at]!)] as Obj[];
    const item = v.edit[1] % list.length;
    const changed = { ...list[item]!, edited_by_host: true };
    requests = requests.map((r, k) => {
      if (k < at) return r;
      const copy = (r[listKey(r)] as unknown[]).slice();
      copy[item] = changed;
      return { ...r, [listKey(r)]: copy };
    });
  }
  if (v.retry !== undefined) {
    const at = v.retry % requests.length;
    requests = [...requests.slice(0, at + 1), ...requests.slice(at)];
  }
  if (v.rewind !== undefined) {
    const a = v.rewind[0] % requests.length;
    const b = v.rewind[1] % (a + 1);
    requests = [...requests.slice(0, a + 1), requests[b]!, ...requests.slice(a)];
  }
  return v.rebuilt ? requests.map(clone) : requests;
}

/**
 * `vault` whose deliveries during request `lose` find every artifact gone, and keep finding it
 * gone until put again; deliveries during request `fail` throw.
 */
function losing(vault: Vault, lose: number | undefined, fail: number | undefined, current: () => number): Vault {
  const lost = new Set<string>();
  return new Proxy(vault, {
    get: (t, k) => {
      if (k === 'deliver')
        return async (ids: readonly string[], scope?: StoreScope) => {
          if (current() === fail) throw new Error('vault unavailable');
          if (current() === lose) for (const id of ids) lost.add(id);
          const result = await t.deliver(
            ids.filter((id) => !lost.has(id)),
            scope,
          );
          return { ...result, missing: [...result.missing, ...ids.filter((id) => lost.has(id))] };
        };
      if (k === 'put')
        return async (...args: Parameters<Vault['put']>) => {
          const result = await t.put(...args);
          lost.delete(result.artifactId);
          return result;
        };
      return Reflect.get(t, k, t) as unknown;
    },
  });
}

let runs = 0;
const carried = { duplicates: 0, history: 0, receipts: 0 };
/** The carry options of a run: on (counting the carried plans) or off. */
const carrying = (carry: boolean): { carry: boolean; onCarried?: (stage: CarriedStage) => void } =>
  carry ? { carry, onCarried: (stage) => carried[stage]++ } : { carry };

/** Every output (JSON text) and decision of the requests through a fresh chain and SQLite file. */
async function outputs(
  requests: readonly ProviderRequest[],
  carry: boolean,
  faults: Pick<Variation, 'lose' | 'fail'> = { lose: undefined, fail: undefined },
  blockTurns = 0,
  pricing?: (step: Step<ProviderRequest>) => PricingProfile,
): Promise<string[]> {
  const real = await createVault({ path: join(dir, `v${runs++}.sqlite3`) });
  let current = -1;
  const vault = losing(real, faults.lose, faults.fail, () => current);
  const input = new Subject<Step<ProviderRequest>>();
  const out: Step<ProviderRequest>[] = [];
  const sub = input
    .pipe(
      collapseDuplicates({
        vault,
        counter,
        minArtifactChars: 300,
        maxInlineChars: 700,
        inlineViewChars: 250,
        ...carrying(carry),
      }),
      compileRequest({
        vault,
        counter,
        minVaultChars: 150,
        blockTurns,
        ...(pricing === undefined ? {} : { pricing }),
        ...carrying(carry),
      }),
    )
    .subscribe((s) => out.push(s));
  try {
    for (const [i, r] of requests.entries()) {
      current = i;
      input.next(createStep(r, { sessionId: 's', requestId: `r${i}` }));
      while (out.length <= i) await new Promise((resolve) => setImmediate(resolve));
    }
    return out.map((s) => JSON.stringify({ value: s.value, decisions: s.decisions }));
  } finally {
    sub.unsubscribe();
    await real.close();
  }
}

describe('carried plans = full path', () => {
  test.prop([growingSession(shapes), variation], { numRuns: 40 })(
    'byte-identical outputs and decisions for growing, edited, retried and rebuilt sessions and gone artifacts',
    async (session, v) => {
      const requests = vary(session, v);
      const expected = await outputs(requests, false, v, v.blockTurns);
      expect(await outputs(requests, true, v, v.blockTurns)).toEqual(expected);
    },
  );

  it('renders a duplicate copy a new copy makes older as the full path does, also after the history changed', async () => {
    const call = (id: string, name: string): Obj => ({
      role: 'assistant',
      content: null,
      tool_calls: [{ id, type: 'function', function: { name, arguments: '{"path":"a.ts"}' } }],
    });
    const out = (id: string, n: number): Obj => ({
      role: 'tool',
      tool_call_id: id,
      content: Array.from({ length: 40 }, (_, i) => `line ${i} of a.ts (${n})`).join('\n'),
    });
    const head: Obj[] = [
      { role: 'system', content: 'agent' },
      { role: 'user', content: 'fix it' },
    ];
    // Two copies arrive together (the first becomes a duplicate's receipt); the host then drops
    // the second, and a third copy arrives with the next request.
    const both = [...head, call('c1', 'read_file'), out('c1', 0), call('c2', 'read_file'), out('c2', 0)];
    const dropped = [...head, call('c1', 'read_file'), out('c1', 0), { role: 'user', content: 'go on' }];
    const again = [...dropped, call('c3', 'read_file'), out('c3', 0)];
    const later = [...again, { role: 'user', content: 'and?' }];
    // Or the request the copies arrived with fails: the first copy was never shown as a receipt.
    const extended = [...both, { role: 'user', content: 'go on' }];
    const sessions = [
      [both, dropped, again, later],
      [both, extended],
    ];
    for (const fail of [undefined, 0])
      for (const session of sessions) {
        const requests = session.map((messages) => ({ model: 'gpt-4o', messages }));
        const faults = { lose: undefined, fail };
        const expected = await outputs(requests.map(clone), false, faults);
        expect(await outputs(requests.map(clone), true, faults)).toEqual(expected);
        expect(await outputs(requests, true, faults)).toEqual(expected);
      }
  });

  it('decides again the outputs a history sent again showed, as the full path does', async () => {
    const head: Obj[] = [
      { role: 'system', content: 'agent' },
      { role: 'user', content: 'fix it' },
    ];
    // E shows x first; the host then sends a prefix of E (x is old there), then E again.
    const e = [...head, call('x'), out('x'), call('y'), out('y')];
    const prefix = e.slice(0, 5);
    const requests = [e, prefix, e, [...e, { role: 'user', content: 'and?' }]].map((messages) => ({
      model: 'gpt-4o',
      messages,
    }));
    // A rewrite never pays for the prefix request (so x stays a candidate) and always pays after it.
    const never = { name: 'custom', cacheRead: 0.01, cacheWrite: 100, minCachePrefixTokens: 0 };
    const always = { name: 'custom', cacheRead: 1, cacheWrite: 1, minCachePrefixTokens: 0 };
    const pricing = (step: Step<ProviderRequest>): PricingProfile => (step.context.requestId === 'r1' ? never : always);
    for (const blockTurns of [0, 1]) {
      const expected = await outputs(requests.map(clone), false, undefined, blockTurns, pricing);
      expect(await outputs(requests.map(clone), true, undefined, blockTurns, pricing)).toEqual(expected);
    }
  });

  it('plans from scratch once the memo dropped answers it gave (its epoch moved), as the full path does', async () => {
    const r0 = [{ role: 'system', content: 'agent' }, { role: 'user', content: 'fix it' }, call('x'), out('x')];
    const r1 = [...r0, call('y'), out('y')];
    const r2 = [...r1, { role: 'user', content: 'more' }];
    const plans = async (carry: boolean): Promise<string> => {
      const vault = await createVault({ path: join(dir, `memo-${runs++}.sqlite3`) });
      try {
        const state = createSessionPool({ vault, counter, carry })({ sessionId: 's' });
        const real = createConversationMemo(vault, 's', 1);
        // After r1 the memo forgets r1's rewrite (as a dropped key whose mirror write failed would).
        let forgot = false;
        const memo = new Proxy(real, {
          get: (t, k) => {
            if (k === 'epoch') return t.epoch + (forgot ? 1 : 0);
            if (k === 'rewritten' && forgot) return () => undefined;
            return Reflect.get(t, k, t) as unknown;
          },
        });
        let last = '';
        for (const [n, messages] of [r0, r1, r2].entries()) {
          if (n === 2) forgot = true;
          const view = state.requests.recognise({ model: 'gpt-4o', messages }).view;
          const plan = await planHistory(state, memo, view, hostToolOutputs(view), {
            sessionId: 's',
            minChars: 150,
            maxArtifactChars: 2_000_000,
            inlineRecentTurns: 1,
            inlineLeases: 1,
            blockTurns: 1,
            requestsAhead: 0,
            digestDiagnosticChars: 400,
            collapseAfterTurns: 0,
            reasoning: false,
            pricing: PRICING_PROFILES.openai,
          });
          await memo.markRequest(plan!.requestKey, { shown: plan!.shown, rewritten: plan!.decided });
          last = JSON.stringify({ items: plan!.items, decided: plan!.decided, shown: plan!.shown, batch: plan!.batch });
        }
        return last;
      } finally {
        await vault.close();
      }
    };
    const expected = await plans(false);
    expect(expected).toContain('"batch":true'); // the forgotten output is decided again
    expect(await plans(true)).toBe(expected);
  });

  it('names the receipts of an earlier output the host changed anew, as the full path does', async () => {
    const head: Obj[] = [
      { role: 'system', content: 'agent' },
      { role: 'user', content: 'fix it' },
    ];
    // Short enough for collapseDuplicates to leave inline, long enough for compileRequest to digest.
    const small = (id: string, extra = ''): Obj => ({
      role: 'tool',
      tool_call_id: id,
      content: Array.from({ length: 15 }, (_, i) => `${id}.ts line ${i}: const v${i} = ${i};${extra}`).join('\n'),
    });
    const r0 = [...head, call('x'), small('x'), call('y'), small('y'), call('z'), small('z')];
    const r1 = [...r0, call('w'), small('w')];
    // The first rewritten output changes (it is new, and inline, from there on): the renderings
    // after it move up one place.
    const r2 = [...head, call('x'), small('x', ' // changed'), ...r1.slice(4), call('v'), small('v')];
    const r3 = [...r2, { role: 'user', content: 'and?' }];
    const requests = [r0, r1, r2, r3].map((messages) => ({ model: 'gpt-4o', messages }));
    for (const blockTurns of [0, 1]) {
      const expected = await outputs(requests.map(clone), false, undefined, blockTurns);
      expect(expected.join('')).toContain('"artifacts":["a_');
      expect(await outputs(requests.map(clone), true, undefined, blockTurns)).toEqual(expected);
      expect(await outputs(requests, true, undefined, blockTurns)).toEqual(expected);
    }
    // Or the artifacts of the earlier rewrites are found gone: their receipts are vaulted again.
    const growing = [r0, r1, [...r1, call('v'), small('v')], [...r1, call('v'), small('v'), call('u'), small('u')]];
    for (const lose of [1, 2, 3]) {
      const faults = { lose, fail: undefined };
      const sent = growing.map((messages) => ({ model: 'gpt-4o', messages }));
      const expected = await outputs(sent.map(clone), false, faults, 1);
      expect(await outputs(sent.map(clone), true, faults, 1)).toEqual(expected);
      expect(await outputs(sent, true, faults, 1)).toEqual(expected);
    }
  });

  it('scans the outputs of a view on from an earlier scan only when the view was extended from it', () => {
    const slot = (item: number, kind: 'user' | 'tool_output'): Slot => ({
      kind,
      path: ['messages', item],
      value: `${item}`,
      item,
    });
    const view = (slots: Slot[]): RequestView => ({ format: 'chat', items: [], itemInfo: [], slots });
    const first = slot(0, 'user');
    // Two views that share their first slot object and nothing after it (not one extended from the other).
    const a = view([first, slot(1, 'tool_output'), slot(2, 'user')]);
    const b = view([first, slot(1, 'user'), slot(2, 'tool_output'), slot(3, 'tool_output')]);
    const expected = b.slots.filter((s) => s.kind === 'tool_output');
    hostToolOutputs(a);
    expect(hostToolOutputs(b)).toEqual(expected);
  });

  // Not vacuous: the sessions above took every carried path, many times.
  it('carried plans in the sessions above', () => {
    expect(carried.duplicates).toBeGreaterThan(20);
    expect(carried.history).toBeGreaterThan(20);
    expect(carried.receipts).toBeGreaterThan(20);
  });

  test.prop([growingSession({ ...shapes, minTurns: 4, formats: ['chat'] }), fc.boolean()], { numRuns: 6 })(
    'byte-identical outputs when the session state is re-created between requests (its lane evicted)',
    async (session, rebuilt) => {
      const requests = rebuilt ? reusing(session).map(clone) : reusing(session);
      const overrides = { minArtifactChars: 300, maxInlineChars: 700, contextMinVaultChars: 150 };
      const run = async (carry: boolean): Promise<string[]> => {
        const tt = await createTerminator({
          overrides: { ...overrides, dbPath: join(dir, `tt-${runs++}.sqlite3`) },
          counter,
          carry,
          maxSessions: 1,
          metrics: false,
          ledger: false,
        });
        try {
          const out: string[] = [];
          for (const [i, r] of requests.entries()) {
            out.push(JSON.stringify((await tt.compileRequest(r, { sessionId: 'kept', requestId: `r${i}` })).value));
            // Another session pushes the kept one's lane out every other request.
            if (i % 2 === 1) await tt.compileRequest(clone(requests[0]!), { sessionId: 'other', requestId: `o${i}` });
          }
          return out;
        } finally {
          await tt.close();
        }
      };
      expect(await run(true)).toEqual(await run(false));
    },
  );
});
