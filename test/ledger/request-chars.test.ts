import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createItemMeasures } from '../../src/ledger/item-measures.js';
import { RunningRequestChars } from '../../src/ledger/request-chars.js';
import type { ItemMeasures } from '../../src/ledger/item-measures.js';
import type { ProviderRequest } from '../../src/step.js';

/** The plain sum RunningRequestChars always equals: every item looked up, strings by their length. */
function requestChars(request: ProviderRequest, measures: ItemMeasures): number {
  let chars = 0;
  for (const key of ['messages', 'input', 'system'] as const) {
    const list = request[key];
    if (Array.isArray(list)) for (const item of list) chars += measures.entry(item).chars;
    else if (typeof list === 'string') chars += list.length;
  }
  return chars;
}

/** How one request of a session is made from the previous one's lists. */
type Edit =
  | { kind: 'append'; items: number[] } // a new array: the previous items (same objects), then new ones
  | { kind: 'push'; items: number[] } // the host's own array, extended in place and sent again
  | { kind: 'replace'; at: number; item: number } // the same array, one item swapped in place
  | { kind: 'rebuild' } // new objects with the same content (a host that parses its transcript anew)
  | { kind: 'truncate'; keep: number } // a new, shorter array (a host that trims its history)
  | { kind: 'string'; text: string } // the list is a string this time (Responses' `input`)
  | { kind: 'absent' };

const edit: fc.Arbitrary<Edit> = fc.oneof(
  fc.record({ kind: fc.constant('append' as const), items: fc.array(fc.nat(40), { maxLength: 4 }) }),
  fc.record({ kind: fc.constant('push' as const), items: fc.array(fc.nat(40), { maxLength: 4 }) }),
  fc.record({ kind: fc.constant('replace' as const), at: fc.nat(20), item: fc.nat(40) }),
  fc.record({ kind: fc.constant('rebuild' as const) }),
  fc.record({ kind: fc.constant('truncate' as const), keep: fc.nat(20) }),
  fc.record({ kind: fc.constant('string' as const), text: fc.string({ maxLength: 30 }) }),
  fc.record({ kind: fc.constant('absent' as const) }),
);

const itemOf = (n: number): object =>
  n % 3 === 0
    ? { role: 'tool', tool_call_id: `c${n}`, content: 'x'.repeat(n * 7) }
    : { role: n % 3 === 1 ? 'user' : 'assistant', content: `turn ${n} ${'é'.repeat(n)}` };

describe('RunningRequestChars', () => {
  it('equals the full sum of the items after every request of a session, however the host builds its lists (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.constantFrom('messages' as const, 'input' as const, 'system' as const), edit), {
          maxLength: 40,
        }),
        (edits) => {
          const measures = createItemMeasures();
          const running = new RunningRequestChars();
          const lists: Record<'messages' | 'input' | 'system', unknown> = {
            messages: [],
            input: undefined,
            system: undefined,
          };
          for (const [key, e] of edits) {
            const list = lists[key];
            const array = Array.isArray(list) ? (list as object[]) : [];
            switch (e.kind) {
              case 'append':
                lists[key] = [...array, ...e.items.map(itemOf)];
                break;
              case 'push':
                array.push(...e.items.map(itemOf));
                lists[key] = array;
                break;
              case 'replace':
                if (array.length > 0) array[e.at % array.length] = itemOf(e.item);
                lists[key] = array;
                break;
              case 'rebuild':
                lists[key] = array.map((item) => structuredClone(item));
                break;
              case 'truncate':
                lists[key] = array.slice(0, e.keep);
                break;
              case 'string':
                lists[key] = e.text;
                break;
              case 'absent':
                lists[key] = undefined;
                break;
            }
            const request = { model: 'm', ...lists } as ProviderRequest;
            expect(running.measure(request, measures)).toBe(requestChars(request, measures));
          }
        },
      ),
    );
  });

  it('looks up only the items a request does not share with the previous one', () => {
    const measures = createItemMeasures();
    const looked: unknown[] = [];
    const spy = { ...measures, entry: (value: unknown) => (looked.push(value), measures.entry(value)) };
    const running = new RunningRequestChars();
    const first = [itemOf(1), itemOf(2), itemOf(3)];
    running.measure({ model: 'm', messages: first }, spy);
    looked.length = 0;
    const next = [...first, itemOf(4), itemOf(5)];
    const chars = running.measure({ model: 'm', messages: next }, spy);
    expect(looked).toEqual([next[3], next[4]]);
    expect(chars).toBe(requestChars({ model: 'm', messages: next }, measures));
  });
});
