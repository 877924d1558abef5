/**
 * Prefix recognition (src/model/prefix.ts) must not change a single output byte: the request
 * stages with recognition on are compared with the full path (recognition off) on generated
 * growing sessions of all three formats, with the host reusing its objects and with every request
 * deep-cloned, also when the host edits an earlier item; and `extendView` must read exactly what
 * `readRequest` reads.
 */
import { join } from 'node:path';
import { describe, expect } from 'vitest';
import { fc, it, test } from '@fast-check/vitest';
import { compileRequest } from '../../operators/compile-request.js';
import { collapseDuplicates } from '../../operators/collapse-duplicates.js';
import { createRequestMemo, Recognitions, sameJson } from '../../src/model/prefix.js';
import { readRequest } from '../../src/model/index.js';
import { extendView } from '../../src/model/read.js';
import { createTerminator } from '../../src/runtime/index.js';
import type { ProviderRequest } from '../../src/step.js';
import { TOOL_NAMES, growingSession, type RequestOptions } from '../../src/testing/index.js';
import { createVault } from '../../src/vault/index.js';
import { clone, fileFixture, listKey, reusing, runAll, type RequestOp } from './helpers.js';

const { dir, counter } = fileFixture('prefix');

type Obj = Record<string, unknown>;

describe('sameJson', () => {
  it('is true exactly when the JSON texts are the same', () => {
    expect(sameJson({ a: 1, b: [1, 'x', null, { c: true }] }, { a: 1, b: [1, 'x', null, { c: true }] })).toBe(true);
    expect(sameJson({ a: 1, b: 2 }, { b: 2, a: 1 })).toBe(false); // key order is part of the text
    expect(sameJson({ a: 1 }, { a: 1, b: undefined })).toBe(false);
    expect(sameJson([1, 2], { 0: 1, 1: 2 })).toBe(false);
    expect(sameJson({ a: 0 }, { a: -0 })).toBe(false);
    expect(sameJson({ a: Number.NaN }, { a: Number.NaN })).toBe(false);
    expect(sameJson({ d: new Date(0) }, { d: new Date(0) })).toBe(false); // not plain: identity only
    expect(sameJson('x'.repeat(100_000), `${'x'.repeat(99_999)}x`)).toBe(true);
    expect(sameJson({ a: 1, b: 2 }, { a: 1 })).toBe(false);
    expect(sameJson({ a: 1 }, { a: 1, b: 2 })).toBe(false);
    expect(sameJson(Object.assign(Object.create(null), { a: [1] }), { a: [1] })).toBe(true);
  });

  it('reads own keys only where Object.prototype was given an enumerable key', () => {
    const proto = Object.prototype as Record<string, unknown>;
    proto['polluted'] = 1;
    try {
      expect(sameJson({ a: 1 }, { a: 1 })).toBe(true);
      // JSON.stringify gives {"a":1} and {"a":1,"polluted":1}: not the same text.
      expect(sameJson({ a: 1 }, { a: 1, polluted: 1 })).toBe(false);
      expect(sameJson({ a: 1, polluted: 1 }, { a: 1 })).toBe(false);
    } finally {
      delete proto['polluted'];
    }
  });

  const negativeZero = (v: unknown): boolean =>
    Object.is(v, -0) || (typeof v === 'object' && v !== null && Object.values(v).some(negativeZero));
  test.prop([fc.jsonValue(), fc.jsonValue()])('agrees with JSON.stringify on JSON values', (a, b) => {
    if (sameJson(a, b)) expect(JSON.stringify(a)).toBe(JSON.stringify(b));
    expect(sameJson(a, clone(a))).toBe(!negativeZero(a));
  });
});

// Sessions that reach bounded views, duplicates and digests at these thresholds.
const shapes: RequestOptions = { maxTurns: 6, sizes: ['tiny', 'medium'], tools: [...TOOL_NAMES, 'weird tool]\n'] };

/** `value` with the middle character of its longest string changed: same shape, same lengths, other text. */
function retyped(value: unknown): unknown {
  let longest: { holder: Obj | unknown[]; key: string | number; text: string } | undefined;
  const walk = (v: unknown): void => {
    if (typeof v !== 'object' || v === null) return;
    for (const [k, x] of Object.entries(v)) {
      if (typeof x === 'string' && x.length > (longest?.text.length ?? 0))
        longest = { holder: v as Obj, key: Array.isArray(v) ? Number(k) : k, text: x };
      else walk(x);
    }
  };
  const copy = clone(value);
  walk(copy);
  if (longest !== undefined) {
    const m = Math.floor(longest.text.length / 2);
    const c = longest.text[m] === 'x' ? 'y' : 'x';
    (longest.holder as Record<string | number, unknown>)[longest.key] =
      longest.text.slice(0, m) + c + longest.text.slice(m + 1);
  }
  return copy;
}

/**
 * From request `at` on, the host sends item `item` edited (a changed history the fast path must
 * notice): with a key added, or with one character of its longest text changed.
 */
function edited(session: readonly ProviderRequest[], at: number, item: number, sameShape: boolean): ProviderRequest[] {
  const list = session[at]![listKey(session[at]!)] as Obj[];
  if (item >= list.length) return [...session];
  const changed = sameShape ? retyped(list[item]) : { ...list[item]!, edited_by_host: true };
  return session.map((r, k) => {
    if (k < at) return r;
    const copy = (r[listKey(r)] as unknown[]).slice();
    copy[item] = changed;
    return { ...r, [listKey(r)]: copy };
  });
}

describe('extendView', () => {
  test.prop([growingSession(shapes)], { numRuns: 40 })(
    'reads a grown request exactly as readRequest does',
    (session) => {
      const requests = reusing(session);
      let view = readRequest(requests[0]!);
      for (const request of requests.slice(1)) {
        const grown = extendView(view, request);
        const whole = readRequest(request);
        expect(grown).toBeDefined();
        expect(grown).toEqual(whole);
        view = grown!;
      }
    },
  );

  it('declines when a new item defines a call an earlier output named, or the list changed', () => {
    const orphan = { role: 'tool', tool_call_id: 'late', content: 'out' };
    const first = { messages: [{ role: 'system', content: 's' }, { role: 'user', content: 'u' }, orphan] };
    const view = readRequest(first);
    const late = {
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'late', type: 'function', function: { name: 'grep', arguments: '{}' } }],
    };
    expect(extendView(view, { messages: [...first.messages, late] })).toBeUndefined();
    expect(
      readRequest({ messages: [...first.messages, late] }).slots.find((s) => s.kind === 'tool_output')?.toolName,
    ).toBe('grep');
    expect(
      extendView(view, { messages: [first.messages[0], { role: 'user', content: 'other' }, orphan] }),
    ).toBeUndefined();
    const grown = extendView(view, { messages: [...first.messages, { role: 'user', content: 'more' }] });
    expect(grown).toEqual(readRequest({ messages: [...first.messages, { role: 'user', content: 'more' }] }));
    expect(extendView(view, { messages: [...first.messages, { role: 'user', content: 'again' }] })).toBeUndefined(); // already extended
  });
});

describe('recognition', () => {
  it('hands the earlier equal objects to the stages and the caller objects back', () => {
    const memo = createRequestMemo();
    const first = {
      model: 'm',
      tools: [{ type: 'function', function: { name: 'f' } }],
      messages: [{ role: 'user', content: 'a' }],
    };
    memo.recognise(first);
    const second = clone({ ...first, messages: [...first.messages, { role: 'assistant', content: 'b' }] });
    const seen = memo.recognise(second);
    expect(seen.shared).toBe(1);
    expect((seen.request['messages'] as unknown[])[0]).toBe(first.messages[0]);
    expect(seen.request['tools']).toBe(first.tools);
    expect(seen.restore(seen.request)).toBe(second);
    const out: Obj = {
      ...seen.request,
      messages: [(seen.request['messages'] as unknown[])[0], { role: 'assistant', content: 'B' }],
    };
    const back = seen.restore(out);
    expect((back['messages'] as unknown[])[0]).toBe(second.messages[0]);
    expect(back['tools']).toBe(second.tools);
    expect(JSON.stringify(back)).toBe(JSON.stringify(out));
  });

  it('hands back the items a stage wrote wherever they stand, before or after caller objects', () => {
    const memo = createRequestMemo();
    const first = { model: 'm', messages: ['a', 'b', 'c'].map((content) => ({ role: 'user', content })) };
    memo.recognise(first);
    const second = clone(first);
    const seen = memo.recognise(second);
    const known = seen.request['messages'] as unknown[];
    const [own, last] = [
      { role: 'user', content: 'A' },
      { role: 'user', content: 'C' },
    ];
    const back = seen.restore({ ...seen.request, messages: [own, known[1], last] })['messages'] as unknown[];
    expect(back).toEqual([own, second.messages[1], last]);
    expect(back.map((m, i) => m === [own, second.messages[1], last][i])).toEqual([true, true, true]);
  });

  it("compares a rebuilt item with the previous request's copy of it, not the first-seen one, and sees an edit", () => {
    const memo = createRequestMemo();
    // Property reads of each request's objects, by request.
    const reads = [0, 0, 0];
    const watched = (request: { model: string; messages: Obj[] }, k: number) => ({
      ...request,
      messages: request.messages.map(
        (m) =>
          new Proxy(m, {
            get: (t, p, r) => (reads[k]!++, Reflect.get(t, p, r)),
            ownKeys: (t) => (reads[k]!++, Reflect.ownKeys(t)),
          }),
      ),
    });
    const first = { model: 'm', messages: ['a', 'b'].map((content) => ({ role: 'user', content })) };
    const requests = [watched(first, 0), watched(clone(first), 1)];
    for (const r of requests) memo.recognise(r);
    const edited = clone(first);
    edited.messages[1]!.content = 'B';
    reads.fill(0);
    const seen = memo.recognise(watched(edited, 2));
    const known = seen.request['messages'] as unknown[];
    expect(known[0]).toBe(requests[0]!.messages[0]);
    expect(known[1]).not.toBe(requests[0]!.messages[1]);
    expect(JSON.stringify(known[1])).toBe('{"role":"user","content":"B"}');
    expect(seen.shared).toBe(1);
    // The comparison walked the second request's objects (the first-seen ones are what the stages read).
    expect(reads[1]).toBeGreaterThan(0);
  });
});

describe('recognition switched off (the option)', () => {
  it('reads every request whole, its caller objects as they are, recognition off for that memo only', () => {
    const recognitions = new Recognitions();
    const off = createRequestMemo({ recognise: false, recognitions });
    const on = createRequestMemo({ recognitions });
    const items = Array.from({ length: 4 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `m${i}` }));
    off.recognise({ model: 'm', messages: items.slice(0, 2) });
    on.recognise({ model: 'm', messages: items.slice(0, 2) });
    const later = { model: 'm', messages: clone(items) };
    const before = recognitions.stats().compared;
    const seen = off.recognise(later);
    expect(seen.shared).toBe(0);
    expect(seen.request).toBe(later);
    expect(recognitions.stats().compared).toBe(before);
    expect(on.recognise(clone(later)).shared).toBe(2);
  });

  it('is rejected by the operators when not a boolean (and recognitions when not a Recognitions)', async () => {
    const vault = await createVault({ path: join(dir, 'bad-option.sqlite3') });
    try {
      const bad = { vault, prefixRecognition: 'no' as unknown as boolean };
      expect(() => collapseDuplicates(bad)).toThrow(/collapseDuplicates: prefixRecognition must be a boolean/);
      expect(() => compileRequest(bad)).toThrow(/compileRequest: prefixRecognition must be a boolean/);
      const foreign = { vault, recognitions: {} as unknown as Recognitions };
      expect(() => collapseDuplicates(foreign)).toThrow(/collapseDuplicates: recognitions must be a Recognitions/);
      expect(() => compileRequest(foreign)).toThrow(/compileRequest: recognitions must be a Recognitions/);
    } finally {
      await vault.close();
    }
  });
});

describe('a later stage', () => {
  it('takes the items an earlier stage recognised in the same caller list without comparing them again', () => {
    // The two stages share the Terminator's recognitions.
    const recognitions = new Recognitions();
    const [first, second] = [createRequestMemo({ recognitions }), createRequestMemo({ recognitions })];
    const items = Array.from({ length: 6 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `m${i}` }));
    const a = { model: 'm', messages: items.slice(0, 4) };
    first.recognise(a);
    second.recognise(a);
    const b = clone({ ...a, messages: items });
    const seen = first.recognise(b);
    const before = recognitions.stats().compared;
    const later = second.recognise(b);
    expect(recognitions.stats().compared).toBe(before);
    expect(later.shared).toBe(4);
    expect(later.request['messages']).toEqual(seen.request['messages']);
    expect((later.request['messages'] as unknown[])[3]).toBe(a.messages[3]);
  });
});

describe('the recognitions a Terminator shares', () => {
  it("hold a rebuilding host's objects only until its session's next request, and other sessions' latest", () => {
    const recognitions = new Recognitions();
    const stages = (): ReturnType<typeof createRequestMemo>[] => [0, 1].map(() => createRequestMemo({ recognitions }));
    const [x, y] = [stages(), stages()];
    const items = (s: string): Obj[] => Array.from({ length: 6 }, (_, i) => ({ role: 'user', content: `${s}${i}` }));
    const rebuilt = (s: string): Obj[][] => [2, 4, 6].map((n) => clone(items(s).slice(0, n)));
    const [xs, ys] = [rebuilt('x'), rebuilt('y')];
    // Interleaved: y1, x1, y2, x2, x3, each through both stages.
    for (const [memos, messages] of [
      [y, ys[0]],
      [x, xs[0]],
      [y, ys[1]],
      [x, xs[1]],
      [x, xs[2]],
    ] as const)
      for (const memo of memos) memo.recognise({ model: 'm', messages });
    expect(recognitions.canonicalOf(xs[2]![0])).toBe(xs[0]![0]);
    expect(recognitions.canonicalOf(ys[1]![1])).toBe(ys[0]![1]);
    // x's second request's rebuilt objects are no longer held: not recognised any more.
    expect(recognitions.canonicalOf(xs[1]![0])).toBe(xs[1]![0]);
  });
});

describe('a host that grows its own array in place', () => {
  it('has every request read whole: the previous list is a copy, not the caller array', () => {
    const memo = createRequestMemo();
    const messages: unknown[] = [{ role: 'user', content: 'go' }];
    const request = { model: 'm', messages };
    memo.recognise(request);
    messages.push(
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'c', type: 'function', function: { name: 'grep', arguments: '{}' } }],
      },
      { role: 'tool', tool_call_id: 'c', content: 'out' },
    );
    const seen = memo.recognise(request);
    expect(seen.shared).toBe(1);
    expect(seen.view).toEqual({ ...readRequest(request), items: seen.view.items });
    expect(seen.view.items).toEqual(messages);
    expect(seen.restore(seen.request)).toBe(request);
  });
});

describe('fast path = full path', () => {
  let runs = 0;
  const chain =
    (
      vault: Parameters<typeof collapseDuplicates>[0]['vault'],
      prefixRecognition: boolean,
      recognitions: Recognitions,
    ): RequestOp =>
    (src) =>
      src.pipe(
        collapseDuplicates({
          vault,
          counter,
          minArtifactChars: 300,
          maxInlineChars: 700,
          inlineViewChars: 250,
          prefixRecognition,
          recognitions,
        }),
        compileRequest({ vault, counter, minVaultChars: 150, prefixRecognition, recognitions }),
      );
  /** Every output (JSON text) and decision of the session through a fresh chain and SQLite file. */
  async function outputs(
    requests: readonly ProviderRequest[],
    recognition: boolean,
    recognitions = new Recognitions(),
  ): Promise<string[]> {
    const vault = await createVault({ path: join(dir, `v${runs++}.sqlite3`) });
    try {
      const outs = await runAll(
        chain(vault, recognition, recognitions),
        requests.map((r, i) => [r, { sessionId: 's', requestId: `r${i}` }] as const),
      );
      return outs.map((s) => JSON.stringify({ value: s.value, decisions: s.decisions }));
    } finally {
      await vault.close();
    }
  }

  test.prop([growingSession(shapes), fc.option(fc.tuple(fc.nat(), fc.nat(), fc.boolean()), { nil: undefined })], {
    numRuns: 20,
  })(
    'byte-identical outputs with reused and with deep-cloned objects, also after the host edits an earlier item',
    async (session, edit) => {
      const reused =
        edit === undefined
          ? reusing(session)
          : edited(reusing(session), edit[0] % session.length, edit[1] % 12, edit[2]);
      const expected = await outputs(reused.map(clone), false);
      const recognitions = new Recognitions();
      const before = recognitions.stats();
      expect(await outputs(reused.map(clone), true, recognitions)).toEqual(expected);
      // Not vacuous: the cloned history was recognised by comparison, and without an edit the views
      // grew (an edit of the first item leaves no shared prefix to extend: the full path is right).
      const after = recognitions.stats();
      expect(after.compared).toBeGreaterThan(before.compared);
      if (edit === undefined) expect(after.extended).toBeGreaterThan(before.extended);
      expect(await outputs(reused, false)).toEqual(expected);
      expect(await outputs(reused, true)).toEqual(expected);
    },
  );
});

describe('eviction', () => {
  it('a session whose lanes were evicted renders its next requests as an uninterrupted one does', async () => {
    const [session] = fc.sample(growingSession({ ...shapes, minTurns: 5, maxTurns: 6, formats: ['chat'] }), {
      numRuns: 1,
      seed: 7,
    });
    const requests = session!.map(clone);
    const overrides = { minArtifactChars: 300, maxInlineChars: 700, contextMinVaultChars: 150 };
    const run = async (evict: boolean): Promise<string[]> => {
      const tt = await createTerminator({
        overrides: { ...overrides, dbPath: join(dir, `tt-${evict}.sqlite3`) },
        counter,
        maxSessions: 1,
        metrics: false,
        ledger: false,
      });
      try {
        const out: string[] = [];
        for (const [i, r] of requests.entries()) {
          out.push(JSON.stringify((await tt.reduceRequest(clone(r), { sessionId: 'kept', requestId: `r${i}` })).value));
          // Three other sessions push the kept one's lane (and its recognition state) out of the LRU.
          if (evict)
            for (const other of ['a', 'b', 'c', 'd'])
              await tt.reduceRequest(clone(requests[0]!), { sessionId: other, requestId: `${other}${i}` });
        }
        return out;
      } finally {
        await tt.close();
      }
    };
    const uninterrupted = await run(false);
    expect(uninterrupted.some((s) => s.includes('[Token Terminator digest'))).toBe(true);
    const evicted = await run(true);
    const first = evicted.findIndex((s, i) => s !== uninterrupted[i]);
    if (first >= 0) {
      const a = uninterrupted[first]!,
        b = evicted[first]!;
      let k = 0;
      while (a[k] === b[k]) k++;
      console.log(
        'DIFF at request',
        first,
        'char',
        k,
        '\nA:',
        a.slice(k - 200, k + 300),
        '\nB:',
        b.slice(k - 200, k + 300),
      );
    }
    expect(first).toBe(-1);
  });
});
