/**
 * The names a conversation is about, for the focus lines of views (src/compact/focus.ts): the
 * user messages of the instruction prefix (the task), then every assistant message's text and
 * tool-call arguments, oldest first, so the agent's latest words win the term budget. Computed
 * per item once (items are shared between the requests of a session) in the caller's memo (the
 * session's, or the subscription's), so a request costs the terms of its new items only.
 */
import { focusTerms } from '../compact/focus.js';
import { stringsOf } from '../measure/canonical-json.js';
import type { RequestView } from '../model/types.js';
import type { WeakMemo } from '../weak-memo.js';

/** Focus terms by conversation item: one per session or subscription ({@link conversationTerms}). */
export type FocusTermsMemo = WeakMemo<object, readonly string[]>;

/**
 * The focus terms of the conversation items before `before` (default: all of them): the last
 * `max` distinct names, most recent last. `perItem` keeps each item's terms for the next request.
 */
export function conversationTerms(
  view: RequestView,
  perItem: FocusTermsMemo,
  before = view.items.length,
  max = 400,
): string[] {
  const start = view.itemInfo.findIndex((i) => i.role === 'assistant');
  // Which slots name terms: the task's user text, assistant text, tool-call arguments. An item's
  // terms are memoized by the item, so whether it counts is decided by its slots and position here,
  // never by the memo (the same user message is the task at the top and a plain turn further down).
  const names = (slot: (typeof view.slots)[number], i: number): boolean =>
    slot.kind === 'user'
      ? (start === -1 || i < start) && slot.text !== undefined
      : slot.kind === 'assistant'
        ? slot.text !== undefined
        : slot.kind === 'tool_call' && slot.args !== undefined;
  // Newest item first (its slots are one run, in item order), until `max` distinct names are found:
  // a name keeps the place of its last mention, so the older items cannot change the answer.
  const found = new Set<string>();
  const slots = view.slots;
  for (let end = slots.length; end > 0 && found.size < max;) {
    const i = slots[end - 1]!.item;
    let first = end - 1;
    while (first > 0 && slots[first - 1]!.item === i) first--;
    const run = slots.slice(first, end).filter((slot) => i !== undefined && i < before && names(slot, i));
    end = first;
    if (run.length === 0) continue;
    // Items are shared between a session's requests: each one's terms are extracted once.
    const item = view.items[i!];
    const holder = typeof item === 'object' && item !== null ? item : undefined;
    let terms = holder === undefined ? undefined : perItem.get(holder);
    if (terms === undefined) {
      terms = focusTerms(run.flatMap((slot) => (slot.kind === 'tool_call' ? stringsOf(slot.args) : [slot.text!])));
      if (holder !== undefined) perItem.set(holder, terms);
    }
    for (let t = terms.length - 1; t >= 0 && found.size < max; t--) found.add(terms[t]!);
  }
  return [...found].reverse();
}
