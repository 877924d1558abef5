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
import { sharedLead } from '../model/prefix.js';
import type { WeakMemo } from '../weak-memo.js';

/** Focus terms by conversation item, one per session or subscription, and the last walk ({@link conversationTerms}). */
export type FocusTermsMemo = WeakMemo<object, readonly string[]> & { walk?: TermsWalk };

/** The names of a list's leading items (a copy), by last mention (which of them are the task follows from them alone). */
interface TermsWalk {
  readonly items: readonly unknown[];
  readonly order: Map<string, true>;
}

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
  // The last walk goes on when this list starts with the items it walked (the same objects).
  const walk = perItem.walk;
  delete perItem.walk; // taken out while it changes
  const walked = walk?.items.length ?? 0;
  const from = walked <= before && sharedLead(view.items, walk?.items ?? [], undefined) === walked ? walked : 0;
  const order = from > 0 ? walk!.order : new Map<string, true>();
  // Item slots are in item order, after the head's: those of the items walked before are skipped.
  let k = view.slots.length;
  while (k > 0 && (view.slots[k - 1]!.item ?? -1) >= from) k--;
  const texts = new Map<number, string[]>();
  for (const slot of view.slots.slice(k)) {
    const i = slot.item!;
    if (i >= before || !names(slot, i)) continue;
    texts.set(i, [...(texts.get(i) ?? []), ...(slot.kind === 'tool_call' ? stringsOf(slot.args) : [slot.text!])]);
  }
  // In item order (the slots'). Items are shared between a session's requests: each one's terms are extracted once.
  for (const [i, list] of texts) {
    const item = view.items[i];
    const holder = typeof item === 'object' && item !== null ? item : undefined;
    let terms = holder === undefined ? undefined : perItem.get(holder);
    if (terms === undefined) {
      terms = focusTerms(list);
      if (holder !== undefined) perItem.set(holder, terms);
    }
    for (const t of terms) {
      order.delete(t);
      order.set(t, true);
    }
  }
  perItem.walk = { items: view.items.slice(0, before), order };
  return [...order.keys()].slice(-max);
}
