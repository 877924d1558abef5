/**
 * What a request lane is accounted at (`TerminatorOptions.maxSessionBytes`): the characters of
 * its session's latest request's conversation items, from the measures the stages took, times
 * {@link SESSION_BYTES_PER_CHAR}. A session's requests grow by appending, so
 * {@link RunningRequestChars} carries the sum from one request to the next: the items that are the
 * same objects at the same positions as in the previous request keep their running sum (a pointer
 * comparison each), and only the others are looked up.
 */
import type { ItemMeasures } from './item-measures.js';
import type { ProviderRequest } from '../step.js';

/**
 * Bytes of heap a session's state is estimated at per character of its latest request: its lanes'
 * operator memos, plans and renderings hold and derive from those items (the parsed strings, the
 * measures, the plans), several times their characters. Measured by `npm run bench -- memory`,
 * which prints both against this figure: 7–9 for sessions of many small outputs (more for shorter
 * histories), 12 for gateway-shaped sessions of 40 large terminal outputs; the larger, so that a
 * bound in bytes is not passed by more than its estimate.
 */
export const SESSION_BYTES_PER_CHAR = 12;

const LISTS = ['messages', 'input', 'system'] as const;
type ListKey = (typeof LISTS)[number];

/** One list of the previous request: a copy of its items (the caller may reuse its array) and running sums. */
interface Sized {
  readonly items: unknown[];
  /** `sums[i]`: characters of `items[0, i)`; one entry more than items. */
  readonly sums: number[];
}

/**
 * Characters of a request's conversation items (strings: their length), carried from the previous
 * request of one session. One per request lane (state of the session, dropped with it).
 *
 * @example
 * const size = new RunningRequestChars();
 * size.measure(request, measures); // Σ measures.entry(item).chars over messages, input and system
 */
export class RunningRequestChars {
  readonly #lists = new Map<ListKey, Sized>();

  /** Characters of `request`'s conversation items; remembers them for the next call. */
  measure(request: ProviderRequest, measures: ItemMeasures): number {
    let chars = 0;
    for (const key of LISTS) {
      const list: unknown = request[key];
      if (Array.isArray(list)) chars += this.#sum(key, list, measures);
      else {
        this.#lists.delete(key);
        if (typeof list === 'string') chars += list.length;
      }
    }
    return chars;
  }

  #sum(key: ListKey, list: readonly unknown[], measures: ItemMeasures): number {
    const prior = this.#lists.get(key);
    let shared = 0;
    if (prior !== undefined) {
      const n = Math.min(prior.items.length, list.length);
      while (shared < n && prior.items[shared] === list[shared]) shared++;
    }
    const sums = prior?.sums ?? [0];
    sums.length = shared + 1;
    const items = prior?.items ?? [];
    items.length = shared;
    for (let i = shared; i < list.length; i++) {
      const item = list[i];
      items.push(item);
      sums.push(sums[i]! + measures.entry(item).chars);
    }
    if (prior === undefined) this.#lists.set(key, { items, sums });
    return sums[list.length]!;
  }
}
