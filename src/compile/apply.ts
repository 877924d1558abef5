/**
 * Shared by the request stages: write per-slot texts into the conversation items (memoized per
 * item, so unchanged decisions give the very same objects), and measure a candidate against its
 * input with the acceptance gate, incrementally.
 */
import type { RequestView, Slot } from '../model/types.js';
import { withItems, writeSlots } from '../model/index.js';
import { acceptCandidate, type TokenPair, type Verdict } from '../accept.js';
import type { SessionState } from './session.js';

/** Items with the given slot texts written in; undefined when nothing changes. */
export function renderItems(
  state: SessionState,
  view: RequestView,
  changes: readonly { readonly slot: Slot; readonly text: string }[],
): unknown[] | undefined {
  const byItem = new Map<number, { path: readonly (string | number)[]; value: string }[]>();
  for (const c of changes) {
    const i = c.slot.item;
    if (i === undefined || c.slot.value === c.text) continue;
    let list = byItem.get(i);
    if (list === undefined) byItem.set(i, (list = []));
    list.push({ path: c.slot.path.slice(2), value: c.text });
  }
  if (byItem.size === 0) return undefined;
  const items = view.items.slice();
  for (const [i, list] of byItem) {
    const item = view.items[i];
    if (typeof item !== 'object' || item === null) continue;
    items[i] = state.renders.render(item, list, () => writeSlots(item, list));
  }
  return items;
}

/**
 * `items[i]` with the given slot texts written in (what `renderItems(...)[i]` is, without copying
 * the list): for a planner that prices one candidate item at a time. Undefined when nothing changes.
 */
export function renderItemAt(
  state: SessionState,
  items: readonly unknown[],
  i: number,
  changes: readonly { readonly slot: Slot; readonly text: string }[],
): unknown {
  const list: { path: readonly (string | number)[]; value: string }[] = [];
  for (const c of changes)
    if (c.slot.item === i && c.slot.value !== c.text) list.push({ path: c.slot.path.slice(2), value: c.text });
  if (list.length === 0) return undefined;
  const item = items[i];
  if (typeof item !== 'object' || item === null) return item;
  return state.renders.render(item, list, () => writeSlots(item, list));
}

export interface Measured {
  readonly verdict: Verdict;
  readonly request: Readonly<Record<string, unknown>>;
  readonly savedChars: number;
  readonly savedTokens?: number;
}

/** Build the candidate request and run the acceptance gate on it (sizes from the per-item memo). */
export function gate(
  state: SessionState,
  request: Readonly<Record<string, unknown>>,
  view: RequestView,
  items: readonly unknown[],
  receipts: readonly { readonly artifactId: string; readonly verified: boolean }[],
): Measured {
  const listKey = view.listKey!;
  const candidate = withItems(request, listKey, items);
  const rawChars = state.meter.requestChars(request, listKey, view.items);
  const candidateChars = state.meter.requestChars(candidate, listKey, items);
  // Tokens of the items that differ only: the rest of the request counts the same on both sides,
  // so the comparison (and the saving) is the same as over the whole request, and the newest
  // output (never changed here) is not tokenized just to be compared with itself.
  let tokens: TokenPair | undefined;
  const measureTokens = (): TokenPair | undefined => {
    let rawTokens: number | undefined;
    let candidateTokens: number | undefined;
    if (items.length === view.items.length) {
      let a: number | undefined = 0;
      let b: number | undefined = 0;
      for (let i = 0; i < items.length && a !== undefined && b !== undefined; i++) {
        if (items[i] === view.items[i]) continue;
        const ta = state.meter.tokens(view.items[i]);
        const tb = state.meter.tokens(items[i]);
        a = ta === undefined ? undefined : a + ta;
        b = tb === undefined ? undefined : b + tb;
      }
      [rawTokens, candidateTokens] = [a, b];
    } else {
      rawTokens = state.meter.requestTokens(request, listKey, view.items);
      candidateTokens = rawTokens === undefined ? undefined : state.meter.requestTokens(candidate, listKey, items);
    }
    return (tokens =
      rawTokens !== undefined && candidateTokens !== undefined
        ? { raw: rawTokens, candidate: candidateTokens }
        : undefined);
  };
  const verdict = acceptCandidate({ rawChars, candidateChars, tokens: measureTokens, receipts });
  const savedTokens = tokens === undefined ? {} : { savedTokens: tokens.raw - tokens.candidate };
  return { verdict, request: candidate, savedChars: rawChars - candidateChars, ...savedTokens };
}
