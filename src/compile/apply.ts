/**
 * Shared by the request stages: write per-slot texts into the conversation items (memoized per
 * item, so unchanged decisions give the very same objects), and measure a candidate against its
 * input with the acceptance gate, incrementally.
 */
import type { RequestView, Slot } from '../model/types.js';
import { withItems, writeSlots } from '../model/index.js';
import { acceptCandidate, type TokenPair, type Verdict } from '../accept.js';
import type { SessionState } from './session.js';
import { isRecognisedList, sharedLead } from '../model/prefix.js';

type Change = { readonly slot: Slot; readonly text: string };

/** One earlier result of {@link renderItems}, kept (as private copies) to render the next request from. */
export interface Rendering {
  readonly base: readonly unknown[];
  /** Sorted by item. */
  readonly changes: readonly Change[];
  /** The item index and the rendered item of each change, aligned with `changes` (not the whole list: they grow with the changes only). */
  readonly at: readonly number[];
  readonly rendered: readonly unknown[];
  /** Smallest item index a change actually changes (Infinity: none). */
  readonly firstChanged: number;
}

/** Renderings kept per session: the stages render two lists per request (the kept history and the candidate). */
const RENDERINGS_KEPT = 2;

const changes = (c: Change): boolean => c.slot.item !== undefined && c.slot.value !== c.text;

/** True when every change names an item and the items never decrease. */
export function sortedByItem(list: readonly { readonly slot: Slot }[]): boolean {
  let last = -1;
  for (const c of list) {
    const i = c.slot.item;
    if (i === undefined || i < last) return false;
    last = i;
  }
  return true;
}

/**
 * Items with the given slot texts written in; undefined when nothing changes.
 *
 * Incremental: when the items and the changes (the same change objects, sorted by item) share a
 * leading run with an earlier call's, the items before the first difference are taken from that
 * call's result (what rendering them again would give), and only the rest is rendered. The
 * result is the same list, item for item, as rendering every change again.
 */
export function renderItems(state: SessionState, view: RequestView, list: readonly Change[]): unknown[] | undefined {
  const items = view.items;
  const out = items.slice();
  if (!sortedByItem(list)) return renderFrom(state, items, list, 0, out, Infinity) === Infinity ? undefined : out;
  const kept = state.memo.renderings ?? [];
  let best: { r: Rendering; bound: number; k: number } | undefined;
  for (const r of kept) {
    const s = sharedLead(items, r.base, state.requests.lists);
    let k = 0;
    const m = Math.min(list.length, r.changes.length);
    while (k < m && list[k] === r.changes[k]) k++;
    let bound = s;
    if (k < list.length) bound = Math.min(bound, list[k]!.slot.item!);
    if (k < r.changes.length) bound = Math.min(bound, r.changes[k]!.slot.item!);
    if (best === undefined || bound > best.bound) best = { r, bound, k };
  }
  let [j, firstChanged, at, rendered] = [0, Infinity, [] as number[], [] as unknown[]];
  if (best !== undefined && best.bound > 0) {
    // The changes of the items before `bound` are the earlier call's (the same objects), and so are their renderings.
    j = best.k;
    while (j > 0 && list[j - 1]!.slot.item! >= best.bound) j--;
    [at, rendered] = [best.r.at.slice(0, j), best.r.rendered.slice(0, j)];
    for (let x = 0; x < j; x++) out[at[x]!] = rendered[x];
    if (best.r.firstChanged < best.bound) firstChanged = best.r.firstChanged;
  }
  firstChanged = renderFrom(state, items, list, j, out, firstChanged);
  for (let x = j; x < list.length; x++) {
    at.push(list[x]!.slot.item!);
    rendered.push(out[at[x]!]);
  }
  // A recognised list is never changed: kept as it is (its lineage then answers sharedLead).
  const base = isRecognisedList(items, state.requests.lists) ? items : items.slice();
  kept.unshift({ base, changes: list.slice(), at, rendered, firstChanged });
  if (kept.length > RENDERINGS_KEPT) kept.length = RENDERINGS_KEPT;
  state.memo.renderings = kept;
  return firstChanged === Infinity ? undefined : out;
}

/** Write `list[j..]` into `out` (the items, those of `list[..j]` already rendered); the smallest item changed. */
function renderFrom(
  state: SessionState,
  items: readonly unknown[],
  list: readonly Change[],
  j: number,
  out: unknown[],
  firstChanged: number,
): number {
  const byItem = new Map<number, { path: readonly (string | number)[]; value: string }[]>();
  for (let x = j; x < list.length; x++) {
    const c = list[x]!;
    if (!changes(c)) continue;
    const i = c.slot.item!;
    let changesOf = byItem.get(i);
    if (changesOf === undefined) byItem.set(i, (changesOf = []));
    changesOf.push({ path: c.slot.path.slice(2), value: c.text });
    if (i < firstChanged) firstChanged = i;
  }
  for (const [i, changesOf] of byItem) {
    const item = items[i];
    if (typeof item !== 'object' || item === null) continue;
    out[i] = state.renders.render(item, changesOf, () => writeSlots(item, changesOf));
  }
  return firstChanged;
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
      const changed = state.meter.changedTokens(view.items, items);
      [rawTokens, candidateTokens] = [changed?.raw, changed?.candidate];
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
