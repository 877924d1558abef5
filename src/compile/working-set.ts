/**
 * The agent's working set (docs/cache-policy.md, the "working-set" history policy): how long each
 * old output has gone without the agent referring to it, decided from the request alone (the
 * past), so the same history always gets the same answer, in any process. An assistant item (its
 * text, calls and their arguments) refers to an output when it names one of the output's words
 * ({@link referenceWords}) held by at most {@link SHARED_WORD_OUTPUTS} outputs (a word more share
 * is context: a repository root, an everyday word). An output is referred to in the turn it
 * arrived; a later output showing at least {@link SUPERSEDED_SHARE} of its lines again supersedes
 * it (the agent sees those lines in the newer one), and it is idle at once.
 */
import type { RequestView, Slot } from '../model/types.js';
import { stringsOf } from '../measure/canonical-json.js';
import { isRecognisedList, sharedLead } from '../model/prefix.js';
import { slotText } from './references.js';
import type { SessionState } from './session.js';

/** A word held by more outputs than this refers to none of them. */
export const SHARED_WORD_OUTPUTS = 3;
/** Share of an output's distinct lines a later output must show again to supersede it. */
export const SUPERSEDED_SHARE = 0.9;
/** Idle turns reported for a superseded output. */
const SUPERSEDED = 1_000_000;

const WORD = /[A-Za-z_][A-Za-z0-9_./-]{3,}/g;

/**
 * The words of a text that may refer to an output, trailing punctuation dropped.
 *
 * @example
 * referenceWords('see src/app/x.py.'); // Set { 'src/app/x.py' } ("see" is too short)
 */
export function referenceWords(text: string): Set<string> {
  const out = new Set<string>();
  for (const m of text.match(WORD) ?? []) {
    const w = m.replace(/[./-]+$/, '');
    if (w.length >= 4) out.add(w);
  }
  return out;
}

/** Per-item word sets of one session, keyed by the request's item objects (shared across requests). */
export interface WordMemo {
  readonly items: WeakMap<object, Set<string>>;
  readonly outputs: WeakMap<object, Map<string, OutputFacts>>;
  /** Items walked so far in this session (see {@link walkedItems}). */
  walked: number;
}

interface OutputFacts {
  readonly words: Set<string>;
  /** Distinct non-blank lines, trimmed. */
  readonly lines: Set<string>;
}

function outputFacts(text: string): OutputFacts {
  const lines = new Set<string>();
  for (const l of text.split('\n')) {
    const t = l.trim();
    if (t !== '') lines.add(t);
  }
  return { words: referenceWords(text), lines };
}
const newMemo = (): WordMemo => ({ items: new WeakMap(), outputs: new WeakMap(), walked: 0 });

function memoOf(state: SessionState): WordMemo {
  return (state.memo.words ??= newMemo());
}

function itemWords(memo: WordMemo, item: unknown): Set<string> {
  if (typeof item !== 'object' || item === null) return referenceWords(stringsOf(item).join('\n'));
  let words = memo.items.get(item);
  if (words === undefined) memo.items.set(item, (words = referenceWords(stringsOf(item).join('\n'))));
  return words;
}

function factsOf(memo: WordMemo, item: unknown, slot: Slot): OutputFacts {
  const text = slotText(slot.value) ?? '';
  if (typeof item !== 'object' || item === null) return outputFacts(text);
  let byPath = memo.outputs.get(item);
  if (byPath === undefined) memo.outputs.set(item, (byPath = new Map()));
  const key = JSON.stringify(slot.path.slice(2));
  let facts = byPath.get(key);
  if (facts === undefined) byPath.set(key, (facts = outputFacts(text)));
  return facts;
}

/**
 * The words an item names (its text, calls and their arguments), memoized per item object for the
 * session: what the window fit's bounded views keep first (src/window/plan.ts `namedLines`).
 */
export function itemReferenceWords(state: SessionState, item: unknown): ReadonlySet<string> {
  return itemWords(memoOf(state), item);
}

/** Conversation items {@link idleTurns} walked in the session so far (a request that extends the previous one walks its new items only). */
export function walkedItems(state: SessionState): number {
  return memoOf(state).walked;
}

/**
 * The working set's walk over one request's items, kept for the session's next request: a request
 * that extends this one (the same item objects first, the same outputs) walks only what follows them.
 */
export interface Walk {
  /** The items walked (a recognised list or a private copy) and the outputs among them. */
  items: readonly unknown[];
  outputs: readonly Slot[];
  turn: number;
  /** Per output: the turn of its last reference; its distinct lines; how many of them a later output shows. */
  readonly last: number[];
  readonly lines: (number | undefined)[];
  readonly again: number[];
  /** Outputs holding each word (at most SHARED_WORD_OUTPUTS + 1 kept). */
  readonly holders: Map<string, number[]>;
  /** The newest output showing each line. */
  readonly newest: Map<string, number>;
}

const samePath = (a: Slot, b: Slot): boolean =>
  a === b || (a.item === b.item && a.path.length === b.path.length && a.path.every((p, i) => p === b.path[i]));

/**
 * The session's walk when `view` extends it: every walked item is the same object at the same
 * position, every walked output the same slot of it, and the outputs after them belong to new
 * items in item order (the walk counts a later output's lines as it meets them).
 */
function carriedWalk(state: SessionState, view: RequestView, outputs: readonly Slot[]): Walk | undefined {
  const walk = state.memo.walk;
  if (walk === undefined) return undefined;
  const n = walk.items.length;
  if (n > view.items.length || outputs.length < walk.outputs.length) return undefined;
  if (sharedLead(view.items, walk.items, state.requests.lists) < n) return undefined;
  for (let k = 0; k < walk.outputs.length; k++) if (!samePath(outputs[k]!, walk.outputs[k]!)) return undefined;
  const next = outputs[walk.outputs.length];
  return next === undefined || (next.item !== undefined && next.item >= n) ? walk : undefined;
}

/**
 * Walk items `from`.. of `view` on `walk` (outputs in item order from `walk.outputs.length` on);
 * false when some output was not met (its item is not in the list).
 */
function extendWalk(memo: WordMemo, walk: Walk, view: RequestView, outputs: readonly Slot[], from: number): boolean {
  const info = view.itemInfo;
  let k = walk.outputs.length;
  memo.walked += info.length - from;
  for (let i = from; i < info.length; i++) {
    if (info[i]!.role === 'assistant') {
      if (i === 0 || info[i - 1]!.role !== 'assistant') walk.turn++;
      for (const w of itemWords(memo, view.items[i])) {
        const held = walk.holders.get(w);
        if (held === undefined || held.length > SHARED_WORD_OUTPUTS) continue;
        for (const h of held) walk.last[h] = walk.turn;
      }
    }
    for (; k < outputs.length && outputs[k]!.item === i; k++) {
      walk.last[k] = walk.turn;
      const facts = factsOf(memo, view.items[i], outputs[k]!);
      walk.lines[k] = facts.lines.size;
      walk.again[k] = 0;
      for (const l of facts.lines) {
        // This output shows the line again: the output that showed it last now has it shown later.
        const before = walk.newest.get(l);
        if (before !== undefined) walk.again[before]!++;
        walk.newest.set(l, k);
      }
      for (const w of facts.words) {
        const held = walk.holders.get(w);
        if (held === undefined) walk.holders.set(w, [k]);
        else if (held.length <= SHARED_WORD_OUTPUTS) held.push(k);
      }
    }
  }
  return k === outputs.length;
}

/** Outputs in item order, each of a conversation item (what the walk assumes). */
function walkable(outputs: readonly Slot[], from: number): boolean {
  let item = -1;
  for (let k = from; k < outputs.length; k++) {
    const i = outputs[k]!.item;
    if (i === undefined || i < item) return false;
    item = i;
  }
  return true;
}

/**
 * Turns since each output (by index in `outputs`) was last referred to; 0 for the newest.
 *
 * @example
 * const idle = idleTurns(state, view, outputs); // idle[k] ≥ 4: the agent is done with output k
 */
export function idleTurns(state: SessionState, view: RequestView, outputs: readonly Slot[]): number[] {
  const memo = memoOf(state);
  let walk = carriedWalk(state, view, outputs);
  const from = walk?.items.length ?? 0;
  if (!walkable(outputs, walk?.outputs.length ?? 0)) {
    delete state.memo.walk;
    return idleTurnsOnce(view, outputs, memo);
  }
  // Taken out while it changes: a walk that throws half way is not carried.
  delete state.memo.walk;
  walk ??= { items: [], outputs: [], turn: 0, last: [], lines: [], again: [], holders: new Map(), newest: new Map() };
  if (from < view.items.length || walk.outputs.length < outputs.length) {
    if (!extendWalk(memo, walk, view, outputs, from)) return idleTurnsOnce(view, outputs, memo);
    // A recognised list is never changed; a caller's own array may be, in place, before the next call.
    walk.items = isRecognisedList(view.items, state.requests.lists) ? view.items : view.items.slice();
    walk.outputs = outputs.slice();
  }
  state.memo.walk = walk;
  const w = walk;
  return outputs.map((_, k) => {
    const lines = w.lines[k];
    if (lines === undefined || lines === 0) return w.turn - w.last[k]!;
    return w.again[k]! >= SUPERSEDED_SHARE * lines ? SUPERSEDED : w.turn - w.last[k]!;
  });
}

/**
 * {@link idleTurns} of one request alone, scanning its whole history: for outputs the walk cannot
 * take in order (outputs outside a conversation item, out of item order), and as the reference the
 * carried walk is tested against.
 */
export function idleTurnsOnce(view: RequestView, outputs: readonly Slot[], memo: WordMemo = newMemo()): number[] {
  const info = view.itemInfo;
  memo.walked += info.length;
  const byItem = new Map<number, number[]>();
  outputs.forEach((slot, k) => {
    if (slot.item !== undefined) byItem.set(slot.item, [...(byItem.get(slot.item) ?? []), k]);
  });
  const last = new Array<number>(outputs.length).fill(0);
  const holders = new Map<string, number[]>();
  const all: (OutputFacts | undefined)[] = [];
  /** The newest output showing each line. */
  const newest = new Map<string, number>();
  let turn = 0;
  for (let i = 0; i < info.length; i++) {
    if (info[i]!.role === 'assistant') {
      if (i === 0 || info[i - 1]!.role !== 'assistant') turn++;
      for (const w of itemWords(memo, view.items[i])) {
        const held = holders.get(w);
        if (held === undefined || held.length > SHARED_WORD_OUTPUTS) continue;
        for (const k of held) last[k] = turn;
      }
    }
    for (const k of byItem.get(i) ?? []) {
      last[k] = turn;
      const facts = factsOf(memo, view.items[i], outputs[k]!);
      all[k] = facts;
      for (const l of facts.lines) newest.set(l, k);
      for (const w of facts.words) {
        const held = holders.get(w);
        if (held === undefined) holders.set(w, [k]);
        else if (held.length <= SHARED_WORD_OUTPUTS) held.push(k);
      }
    }
  }
  return last.map((t, k) => {
    const lines = all[k]?.lines;
    if (lines === undefined || lines.size === 0) return turn - t;
    let again = 0;
    for (const l of lines) if (newest.get(l)! > k) again++;
    return again >= SUPERSEDED_SHARE * lines.size ? SUPERSEDED : turn - t;
  });
}
