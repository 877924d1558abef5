/**
 * Lineage links (src/model/prefix.ts `grownFrom`, src/model/read.ts: the view an extended view grew from): an
 * extended view answers "extended from that view" only for the view it was extended from (and up
 * to two more steps back), never for another view that shares its first slots; and each link
 * holds the list or view before it, so the link past the three the readers follow is cut, or a
 * session's every earlier list and view stays alive through the chain.
 */
import { describe, expect, it } from 'vitest';
import {
  createObservationMemo,
  hostToolOutputs,
  observationSlots,
  observationTest,
} from '../../src/compile/observations.js';
import { createRequestMemo, isRecognisedList, type RequestMemo } from '../../src/model/prefix.js';
import { readRequest } from '../../src/model/index.js';
import { extendView, viewExtends } from '../../src/model/read.js';
import type { RequestView, Slot } from '../../src/model/types.js';
import { readCall, readOutput } from './helpers.js';

type Obj = Record<string, unknown>;

const call = readCall;
const out = (id: string): Obj => readOutput(id);

/**
 * A view that shares `base`'s slots (the very objects) and continues with plain user messages of
 * its own, as many slots as `other` adds after `base`: a sibling of `other`, not its ancestor.
 */
function sibling(base: RequestView, other: RequestView): RequestView {
  const extra: Slot[] = [];
  const items = [...base.items];
  for (let j = base.slots.length; j < other.slots.length; j++) {
    const value = { role: 'user', content: `note ${j}` };
    extra.push({ kind: 'user', path: ['messages', items.length], value, item: items.length, text: value.content });
    items.push(value);
  }
  return { ...base, items, itemInfo: [...base.itemInfo], slots: [...base.slots, ...extra] };
}

describe('an extended view', () => {
  it('extends only the views it was extended from, not a view sharing its first slots', () => {
    const a = readRequest({ model: 'm', messages: [{ role: 'system', content: 'agent' }, call('c1'), out('c1')] });
    const b = extendView(a, { model: 'm', messages: [...a.items, call('c2'), out('c2')] })!;
    const c = extendView(b, { model: 'm', messages: [...b.items, { role: 'user', content: 'go on' }] })!;
    const x = sibling(a, b);
    expect(viewExtends(b, a)).toBe(true);
    expect(viewExtends(c, a)).toBe(true); // two steps back
    expect(viewExtends(b, x)).toBe(false);
    expect(viewExtends(c, x)).toBe(false);
    expect(viewExtends(a, b)).toBe(false);
  });

  it("lists its own tool outputs after a scan of a sibling view (the sibling's scan is not taken over)", () => {
    const a = readRequest({ model: 'm', messages: [{ role: 'system', content: 'agent' }, call('c1'), out('c1')] });
    const b = extendView(a, { model: 'm', messages: [...a.items, call('c2'), out('c2')] })!;
    const x = sibling(a, b);
    const outputs = (v: RequestView): Slot[] => v.slots.filter((s) => s.kind === 'tool_output');
    const memo = createObservationMemo();
    hostToolOutputs(a, memo);
    expect(hostToolOutputs(x, memo)).toEqual(outputs(a));
    expect(hostToolOutputs(b, memo)).toEqual(outputs(b));
    expect(outputs(b)).toHaveLength(2);
  });

  it("finds its own observations after a scan of a sibling view (the sibling's scan is not taken over)", () => {
    const act = (command: string): Obj => ({
      role: 'assistant',
      content: `Running it.\n\`\`\`bash\n${command}\n\`\`\``,
    });
    const observed = (text: string): Obj => ({
      role: 'user',
      content: `<returncode>0</returncode>\n<output>\n${text}\n</output>`,
    });
    const a = readRequest({
      model: 'm',
      messages: [
        { role: 'system', content: 'agent' },
        { role: 'user', content: 'fix it' },
        { role: 'assistant', content: 'Looking at the files first.' }, // the prefix ends here
        act('ls'),
        observed('a.ts'),
      ],
    });
    const b = extendView(a, { model: 'm', messages: [...a.items, act('cat a.ts'), observed('const a = 1;')] })!;
    const x = sibling(a, b);
    const test = observationTest('lineage test', undefined);
    const memo = createObservationMemo();
    const commands = (slots: Slot[]): unknown[] => slots.map((s) => [s.item, s.callArgs]);
    expect(commands(observationSlots(a, test, memo))).toEqual([[4, { command: 'ls' }]]);
    expect(commands(observationSlots(x, test, memo))).toEqual([[4, { command: 'ls' }]]);
    expect(commands(observationSlots(b, test, memo))).toEqual([
      [4, { command: 'ls' }],
      [6, { command: 'cat a.ts' }],
    ]);
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
    const memo = createObservationMemo();
    hostToolOutputs(a, memo);
    expect(hostToolOutputs(b, memo)).toEqual(expected);
  });
});

describe('the lineage links', () => {
  /** Ten appending requests through one memo (the host reusing its objects): the recognised lists and views. */
  function session(): { lists: (readonly unknown[])[]; views: RequestView[]; memo: RequestMemo } {
    const memo = createRequestMemo();
    const items: Obj[] = [{ role: 'system', content: 'agent' }];
    const lists: (readonly unknown[])[] = [];
    const views: RequestView[] = [];
    for (let n = 0; n < 10; n++) {
      items.push({ role: n % 2 === 0 ? 'user' : 'assistant', content: `turn ${n}` });
      const seen = memo.recognise({ model: 'm', messages: items.slice() });
      lists.push(seen.request['messages'] as readonly unknown[]);
      views.push(seen.view);
    }
    return { lists, views, memo };
  }

  // The link of a recognised list is what makes it one (isRecognisedList): only the newest three
  // keep theirs, so the list of request 1 is no longer reachable from the newest list's lineage.
  it('are cut past three steps for recognised lists', () => {
    const { lists, memo } = session();
    expect(lists.map((l) => isRecognisedList(l, memo.lists))).toEqual([
      ...Array<boolean>(7).fill(false),
      true,
      true,
      true,
    ]);
  });

  it('are cut past three steps for extended views', () => {
    const { views } = session();
    const linked = views.slice(1).map((v, k) => viewExtends(v, views[k]!));
    expect(linked).toEqual([...Array<boolean>(6).fill(false), true, true, true]);
    expect(viewExtends(views[9]!, views[6]!)).toBe(true); // three steps back
    expect(viewExtends(views[9]!, views[5]!)).toBe(false);
  });
});
