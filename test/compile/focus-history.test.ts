/**
 * The focus lines of a bounded view name the terms of the history before the output. They are a
 * function of that history's content: a host that edits an earlier item, or that repeats the task
 * message further down, gets the view a fresh process gives the same request (found by the
 * fast-path property in test/compile/prefix.test.ts, seed -1276286827).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fc, test } from '@fast-check/vitest';
import { afterAll, describe, expect, it } from 'vitest';
import { collapseDuplicates } from '../../operators/collapse-duplicates.js';
import { FOCUS_MARKER, focusTerms } from '../../src/compact/focus.js';
import { conversationTerms } from '../../src/compile/conversation-terms.js';
import { stringsOf } from '../../src/measure/canonical-json.js';
import { createTiktokenCounter } from '../../src/measure/index.js';
import { readRequest } from '../../src/model/index.js';
import type { RequestView } from '../../src/model/types.js';
import type { ProviderRequest } from '../../src/step.js';
import { createVault } from '../../src/vault/index.js';
import { WeakMemo } from '../../src/weak-memo.js';
import { runAll } from './helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'tt-focus-history-'));
const counter = createTiktokenCounter('o200k_base');
afterAll(() => {
  counter.dispose?.();
  rmSync(dir, { recursive: true, force: true });
});

const clone = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;

describe('conversationTerms', () => {
  it('takes the task from the top only: the same message object further down adds no terms, also on a second call', () => {
    const task = { role: 'user', content: 'fix ParseConfig' };
    const request = {
      model: 'm',
      messages: [
        task,
        { role: 'assistant', content: 'looking at BetaGamma' },
        task, // the host re-sends the task object as a later turn
      ],
    };
    const view = readRequest(request);
    const memo = new WeakMemo<object, readonly string[]>();
    const first = conversationTerms(view, memo, view.items.length, 1);
    // The second call finds every item's terms memoized: the later copy still does not count.
    expect(conversationTerms(view, memo, view.items.length, 1)).toEqual(first);
    expect(first).toEqual(['BetaGamma']);
  });

  /** Every item's terms in item order, each name moved to its last mention, the last `max` kept. */
  const everyTerm = (view: RequestView, before: number, max: number): string[] => {
    const start = view.itemInfo.findIndex((i) => i.role === 'assistant');
    const texts = new Map<number, string[]>();
    for (const slot of view.slots) {
      const i = slot.item;
      if (i === undefined || i >= before) continue;
      if (slot.kind === 'user' ? (start === -1 || i < start) && slot.text !== undefined : slot.kind === 'assistant')
        texts.set(i, [...(texts.get(i) ?? []), ...(slot.text === undefined ? [] : [slot.text])]);
      else if (slot.kind === 'tool_call' && slot.args !== undefined)
        texts.set(i, [...(texts.get(i) ?? []), ...stringsOf(slot.args)]);
    }
    const order = new Map<string, true>();
    for (const [, list] of [...texts].sort((a, b) => a[0] - b[0]))
      for (const t of focusTerms(list)) {
        order.delete(t);
        order.set(t, true);
      }
    return [...order.keys()].slice(-max);
  };
  const word = fc.constantFrom('AlphaBeta', 'GammaDelta', 'src/x.ts', 'parseConfig', 'Widget', 'the', 'run_tests');
  const text = fc.array(word, { maxLength: 5 }).map((w) => w.join(' '));
  const message = fc.oneof(
    text.map((content) => ({ role: 'user', content })),
    text.map((content) => ({ role: 'assistant', content })),
    fc.tuple(text, text).map(([content, arg]) => ({
      role: 'assistant',
      content,
      tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: JSON.stringify({ arg }) } }],
    })),
  );
  test.prop([fc.array(message, { maxLength: 14 }), fc.nat(), fc.integer({ min: 1, max: 6 })])(
    'takes the newest items only until the budget is full: the same terms as reading every item',
    (messages, cut, max) => {
      const view = readRequest({ model: 'm', messages });
      const before = cut % (messages.length + 1);
      const memo = new WeakMemo<object, readonly string[]>();
      expect(conversationTerms(view, memo, before, max)).toEqual(everyTerm(view, before, max));
      expect(conversationTerms(view, memo, before, max)).toEqual(everyTerm(view, before, max));
    },
  );
  // Each step: the last list grown, cut, edited in the middle or built anew (copies), and a cut-off point.
  const change = fc.tuple(fc.constantFrom('grow', 'cut', 'edit', 'rebuild'), message, fc.nat(), fc.nat());
  test.prop([fc.array(message, { maxLength: 8 }), fc.array(change, { maxLength: 10 })])(
    'goes on from the last walk only over a list that starts with the items it walked: the same terms as reading every item',
    (first, changes) => {
      const memo = new WeakMemo<object, readonly string[]>();
      let messages = first;
      for (const [kind, m, at, cut] of changes) {
        const k = at % (messages.length + 1);
        messages =
          kind === 'grow'
            ? [...messages, m]
            : kind === 'cut'
              ? messages.slice(0, k)
              : kind === 'edit'
                ? [...messages.slice(0, k), m, ...messages.slice(k + 1)]
                : clone(messages);
        const view = readRequest({ model: 'm', messages });
        const before = messages.length - (cut % (messages.length + 1));
        expect(conversationTerms(view, memo, before, 4)).toEqual(everyTerm(view, before, 4));
      }
    },
  );
});

describe('a bounded view after the host edits an earlier item', () => {
  const output = [
    'Compiling app v0.1.0',
    ...Array.from({ length: 60 }, (_, i) => `   Checking step ${i} of the build`),
    'error: cannot find value `x` in src/alpha/Widget.rs:12:5',
    ...Array.from({ length: 60 }, (_, i) => `   Linking part ${i}`),
  ].join('\n');
  const request = (path: string): ProviderRequest => ({
    model: 'gpt-4o',
    messages: [
      { role: 'user', content: 'Fix the build.' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'c1', type: 'function', function: { name: 'read_file', arguments: JSON.stringify({ path }) } },
        ],
      },
      { role: 'tool', tool_call_id: 'c1', content: 'fn main() {}' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'c2', type: 'function', function: { name: 'terminal', arguments: '{"command":"cargo build"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'c2', content: output },
    ],
  });
  const views = async (requests: readonly ProviderRequest[], name: string): Promise<string[]> => {
    const vault = await createVault({ path: join(dir, `${name}.sqlite3`) });
    try {
      const outs = await runAll(
        (src) =>
          src.pipe(
            collapseDuplicates({ vault, counter, minArtifactChars: 300, maxInlineChars: 700, inlineViewChars: 250 }),
          ),
        requests.map((r, i) => [r, { sessionId: 's', requestId: `r${i}` }] as const),
      );
      return outs.map((o) => String((o.value['messages'] as { content: unknown }[])[4]!.content));
    } finally {
      await vault.close();
    }
  };

  it('shows the focus lines the edited history names, with reused and with cloned objects', async () => {
    const named = request('src/alpha/Widget.rs');
    const edited = request('src/beta/Gadget.rs');
    // The host reuses every object but the edited call.
    (edited['messages'] as unknown[]).splice(2, 3, ...(named['messages'] as unknown[]).slice(2));
    const [fresh] = await views([clone(edited)], 'fresh');
    const [before] = await views([named], 'named');
    expect(before).toContain(FOCUS_MARKER); // the first history names Widget.rs: its error line is kept
    expect(fresh).not.toContain(FOCUS_MARKER); // the edited one names it nowhere
    expect(await views([named, edited], 'reused')).toEqual([before, fresh]);
    expect(await views([clone(named), clone(edited)], 'cloned')).toEqual([before, fresh]);
  });

  it("keeps the edited history's view in the requests that extend it (the planned slots carried forward)", async () => {
    const named = request('src/alpha/Widget.rs');
    const edited = request('src/beta/Gadget.rs');
    (edited['messages'] as unknown[]).splice(2, 3, ...(named['messages'] as unknown[]).slice(2));
    // The next requests are the edited list and one more item each (the same objects).
    const next = { ...edited, messages: [...(edited['messages'] as unknown[]), { role: 'user', content: 'again' }] };
    const last = { ...next, messages: [...next.messages, { role: 'assistant', content: 'done' }] };
    const [before] = await views([named], 'named-2');
    const [fresh] = await views([clone(last)], 'fresh-2');
    expect(before).not.toBe(fresh);
    expect(await views([named, edited, next, last], 'extended')).toEqual([before, fresh, fresh, fresh]);
    expect(await views([named, edited, next, last].map(clone), 'extended-cloned')).toEqual([
      before,
      fresh,
      fresh,
      fresh,
    ]);
  });
});
