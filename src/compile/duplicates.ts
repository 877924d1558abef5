/**
 * Planning for `collapseDuplicates`: which large tool outputs of a request get a bounded faithful
 * view, and which newly arrived copies of an output become receipts (the newest copy is inline).
 */
import type { RequestView, Slot } from '../model/types.js';
import { codePoints } from '../measure/index.js';
import { withFocusLines } from '../compact/focus.js';
import { isFailureLine, scanDiagnostics } from '../compact/diagnostic-lines.js';
import { conversationTerms } from './conversation-terms.js';
import { evidenceText, type Receipted } from './evidence.js';
import type { SessionState } from './session.js';

export interface DuplicateOptions {
  readonly sessionId: string;
  readonly minChars: number;
  readonly maxChars: number;
  /** Inline outputs larger than this show a bounded view + receipt (0 = never). */
  readonly maxInlineChars: number;
  readonly viewChars: number;
  /** Whether the item at an index arrived with this request (no earlier request of the conversation had it). */
  readonly isNew: (item: number) => boolean;
  /** Whether an earlier request already rendered the item at an index as a duplicate's receipt (it stays one). */
  readonly wasDuplicate: (item: number) => boolean;
}

interface PlannedBase {
  readonly slot: Slot;
  readonly receipt: Receipted;
  readonly duplicate: boolean;
}

/**
 * One managed output. 'receipt' (an earlier copy of an output shown inline later in the same
 * request) and 'view' (bounded) carry the text that replaces the slot's value; 'inline' carries
 * none: the caller's value stays exactly as it is (same object, same shape).
 */
export type PlannedSlot = PlannedBase &
  ({ readonly render: 'inline' } | { readonly render: 'receipt' | 'view'; readonly text: string });

/** A planned slot that replaces the slot's value: a receipt or a view. */
export type Managed = Extract<PlannedSlot, { readonly text: string }>;

/**
 * The slot replacements a plan writes back (inline outputs contribute none): the planned slots
 * themselves, so an unchanged decision is the same change object request after request.
 */
export function planChanges(plan: readonly PlannedSlot[]): Managed[] {
  return plan.filter((p): p is Managed => p.render !== 'inline');
}

/** What {@link planDuplicates} decided: every planned slot (the carried plan: read before the next request), and the changes. */
export interface DuplicatesPlanned {
  readonly planned: readonly PlannedSlot[];
  readonly managed: readonly Managed[];
}

interface Evidence {
  readonly chars: number;
  readonly receipt: Receipted;
  /** What a bounded view shows: the text itself, or a text-block list's texts (never its JSON). */
  readonly display: string;
  /**
   * The bounded view's text, built on first use (the view size is fixed per stage), and the chain
   * key of the history before the output it was built for: its focus lines name the terms of that
   * history, so a host that edits an earlier item gets the view the edited history gives.
   */
  view?: { readonly before: string; readonly text: string };
}

/** The readable text of a receiptable output: a string as is, a text-part list's texts one after another. */
function displayText(value: unknown, evidence: string): string {
  if (!Array.isArray(value)) return evidence;
  return value.map((part) => String((part as { text?: unknown }).text ?? '')).join('\n');
}

/** The memo key of a slot's evidence in its item. */
const evidenceKey = (slot: Slot, o: DuplicateOptions): string =>
  JSON.stringify(slot.path.slice(2)) + `|${o.minChars}|${o.maxChars}|${slot.toolName ?? ''}`;

/** The evidence an earlier request found for this slot of the same item (no await), unless its artifact is gone. */
function knownEvidence(
  state: SessionState,
  view: RequestView,
  slot: Slot,
  o: DuplicateOptions,
): Evidence | null | undefined {
  const item = view.items[slot.item ?? -1];
  if (typeof item !== 'object' || item === null) return undefined;
  const known = state.itemMemo.get(item)?.get(evidenceKey(slot, o)) as Evidence | null | undefined;
  return known === undefined || reusable(state, known) ? known : undefined;
}

/** Whether memoized evidence may be used again: none found, or its artifact not found gone by a delivery. */
const reusable = (state: SessionState, ev: Evidence | null): boolean =>
  ev === null || !state.evidence.isGone(ev.receipt.artifactId);

/** The evidence of a slot {@link knownEvidence} knows none for (its artifact vaulted), memoized in its item. */
async function evidenceOf(
  state: SessionState,
  view: RequestView,
  slot: Slot,
  o: DuplicateOptions,
): Promise<Evidence | null> {
  const item = view.items[slot.item ?? -1];
  let found: Evidence | null = null;
  const raw = slot.value;
  if (!(typeof raw === 'string' && raw.length < o.minChars)) {
    const text = evidenceText(raw);
    const chars = text === undefined ? 0 : codePoints(text);
    if (text !== undefined && chars >= o.minChars && chars <= o.maxChars) {
      try {
        const meta = {
          toolName: slot.toolName ?? 'tool',
          args: slot.callArgs ?? {},
          sessionId: o.sessionId,
          ...(slot.callId ? { callId: slot.callId } : {}),
        };
        found = { chars, receipt: await state.evidence.receipt(text, meta), display: displayText(raw, text) };
      } catch {
        found = null; // this slot stays inline; the others still reduce
      }
    }
  }
  if (typeof item === 'object' && item !== null) {
    let map = state.itemMemo.get(item);
    if (map === undefined) state.itemMemo.set(item, (map = new Map()));
    map.set(evidenceKey(slot, o), found);
  }
  return found;
}

/** One output slot as the previous plan saw it (reused for the same slot object): its evidence and plans. */
export interface OutputFacts {
  readonly slot: Slot;
  readonly ev: Evidence | null;
  planned?: { [R in PlannedSlot['render']]?: PlannedSlot };
}

export type Found = OutputFacts & { readonly ev: Evidence };

/** Decide every large tool output of a request, reusing the facts of the outputs the previous one had. */
export async function planDuplicates(
  state: SessionState,
  view: RequestView,
  outputs: readonly Slot[],
  o: DuplicateOptions,
): Promise<DuplicatesPlanned> {
  const previous = state.memo.dedupeFacts ?? [];
  const facts: OutputFacts[] = [];
  let p = 0;
  /** How many of the first facts are the previous request's, in the same places. */
  let lead = 0;
  const anyGone = state.evidence.anyGone();
  // Indexed: an iterator (its result objects) per output of the history, on every request, cost more than the loop.
  for (let k = 0; k < outputs.length; k++) {
    const slot = outputs[k]!;
    if (slot.item === undefined) continue;
    let f = previous[p];
    if (f !== undefined && f.slot === slot) p++;
    // A receipt whose artifact a delivery found gone is not reused: the content is vaulted again.
    if (f === undefined || f.slot !== slot || (anyGone && !reusable(state, f.ev))) {
      const known = knownEvidence(state, view, slot, o);
      f = { slot, ev: known !== undefined ? known : await evidenceOf(state, view, slot, o) };
    }
    if (lead === facts.length && f === previous[lead]) lead++;
    facts.push(f);
  }
  state.memo.dedupeFacts = facts;
  // The newest copy of an artifact stays inline; copies that arrived with this request before it
  // become receipts (the content is visible further down). Copies the conversation already had
  // are left to the history rewrites: replacing them here would break the prompt cache.
  // A request that extends the previous one decides its new outputs, and the earlier ones a copy
  // makes older; the others keep their plan (it depends on their evidence alone).
  const carried = state.memo.dedupePlan;
  const extending =
    carried !== undefined &&
    carried.facts === previous &&
    lead === previous.length &&
    carried.maxInlineChars === o.maxInlineChars;
  delete state.memo.dedupePlan;
  const found = extending ? carried.found : [];
  const newest = extending ? carried.newest : new Map<string, number>();
  const planned = extending ? carried.planned : [];
  const from = found.length;
  const redo = new Set(extending ? carried.older : []);
  for (let j = extending ? lead : 0; j < facts.length; j++) {
    const f = facts[j]!;
    if (f.ev === null) continue;
    const id = f.ev.receipt.artifactId;
    const before = newest.get(id);
    if (before !== undefined && before < from) redo.add(before);
    newest.set(id, found.length);
    found.push(f as Found);
  }
  let chain: readonly string[] | undefined;
  const viewOf = (slot: Slot, ev: Evidence): string => {
    chain ??= state.chain.hashes(view.items, (it) => state.meter.measure(it).hash);
    const before = slot.item! > 0 ? chain[slot.item! - 1]! : '';
    if (ev.view?.before !== before) {
      const terms = conversationTerms(view, state.focusTerms, slot.item!);
      const text = `${withFocusLines(boundedView(ev.display, o.viewChars), ev.display, terms)}\n\n${ev.receipt.text}`;
      ev.view = { before, text };
    }
    return ev.view.text;
  };
  const older: number[] = [];
  let decided = 0;
  const plan = (i: number): void => {
    decided++;
    const f = found[i]!;
    const isOlder = newest.get(f.ev.receipt.artifactId) !== i;
    if (isOlder) older.push(i);
    planned[i] = decide(f, isOlder, o, viewOf);
  };
  for (const i of redo) plan(i);
  for (let i = from; i < found.length; i++) plan(i);
  state.memo.dedupePlan = { facts, found, newest, planned, older, maxInlineChars: o.maxInlineChars, decided };
  return { planned, managed: planChanges(planned) };
}

/**
 * What {@link planDuplicates} carries to the session's next request: the facts it planned, those
 * with evidence, the newest of each artifact among them (by index in `found`), their plan, and
 * the indexes a later copy makes older (planned again by every request: their plan depends on it).
 */
export interface DuplicatesCarried {
  readonly facts: readonly OutputFacts[];
  readonly found: Found[];
  readonly newest: Map<string, number>;
  readonly planned: PlannedSlot[];
  readonly older: readonly number[];
  readonly maxInlineChars: number;
  /** Outputs the request planned (the others kept their plan). */
  readonly decided: number;
}

/** One output's plan, built once per rendering (`older`: a later copy of its artifact is in the request). */
function decide(
  f: Found,
  older: boolean,
  o: DuplicateOptions,
  viewOf: (slot: Slot, ev: Evidence) => string,
): PlannedSlot {
  const { slot, ev } = f;
  const { receipt } = ev;
  const planned = (f.planned ??= {});
  if (older && (o.isNew(slot.item!) || o.wasDuplicate(slot.item!)))
    return (planned.receipt ??= { slot, receipt, render: 'receipt', duplicate: true, text: receipt.text });
  if (o.maxInlineChars > 0 && ev.chars > o.maxInlineChars)
    return (planned.view ??= { slot, receipt, render: 'view', duplicate: false, text: viewOf(slot, ev) });
  return (planned.inline ??= { slot, receipt, render: 'inline', duplicate: false });
}

/**
 * A bounded view of a long text on whole lines: the first lines, the diagnostic lines of the part
 * left out (failure lines such as `ERROR`, `FAILED`, `E   `, exceptions and exit statuses, a file
 * read's numbered log lines included, and a traceback's frames) verbatim, with the line before and
 * after each while the failure budget (about 45 % of the view) lasts, then the last lines, with a
 * marker naming each gap. Failure lines come first: context is added only once every failure line
 * that fits is in. Only a line longer than its part's budget is cut.
 * Deterministic, so the same evidence always renders the same view.
 */
export function boundedView(text: string, maxChars: number): string {
  const lines = text.split('\n');
  const clip = (l: string, n: number): string => (l.length <= n ? l : `${l.slice(0, Math.max(0, n - 1))}\u2026`);
  const failing = lines.map((l) => isFailureLine(l));
  const failures = failing.some((f) => f);
  let failBudget = failures ? Math.floor(maxChars * 0.45) : 0;
  let headBudget = Math.floor((maxChars - failBudget) * 0.7);
  let tailBudget = maxChars - failBudget - headBudget;
  const head: string[] = [];
  const tail: string[] = [];
  let i = 0;
  let j = lines.length - 1;
  // Whole lines only; a line is cut only when it alone is longer than its part's budget.
  while (i <= j && headBudget > 0) {
    if (lines[i]!.length >= headBudget && head.length > 0) break;
    const l = clip(lines[i]!, headBudget - 1);
    headBudget -= l.length + 1;
    head.push(l);
    i++;
  }
  while (j >= i && tailBudget > 0) {
    if (lines[j]!.length >= tailBudget && tail.length > 0) break;
    const l = clip(lines[j]!, tailBudget - 1);
    tailBudget -= l.length + 1;
    tail.unshift(l);
    j--;
  }
  // Which middle lines to keep: failure lines first (in order), then their context.
  const kept = new Set<number>();
  const tryKeep = (k: number): boolean => {
    // A gap marker before the line: the first one names the receipt (about 60 chars), later ones about 20.
    const cost = lines[k]!.length + 1 + (kept.has(k - 1) ? 0 : kept.size === 0 ? 60 : 20);
    if (cost > failBudget) return false;
    kept.add(k);
    failBudget -= cost;
    return true;
  };
  // The middle's kept lines never take more than half of what it holds: the view stays a reduction.
  let middleChars = 0;
  for (let k = i; k <= j; k++) middleChars += lines[k]!.length + 1;
  failBudget = Math.min(failBudget, Math.floor(middleChars / 2));
  const middleFailures: number[] = [];
  for (let k = i; k <= j && failBudget > 0; k++) if (failing[k]) middleFailures.push(k);
  for (const k of middleFailures) if (!tryKeep(k)) break;
  if (kept.size > 0 && i <= j) {
    const frames = scanDiagnostics(lines.slice(i, j + 1)).lines.map((k) => k + i);
    const context = [...middleFailures.filter((k) => kept.has(k)).flatMap((k) => [k - 1, k + 1]), ...frames]
      .filter((k) => k >= i && k <= j && !kept.has(k) && lines[k]!.trim() !== '' && lines[k]!.length <= 500)
      .sort((a, b) => a - b);
    // Context never makes the middle more than half of what it leaves out: the view stays a reduction.
    let keptChars = 0;
    for (const k of kept) keptChars += lines[k]!.length + 1;
    for (const k of context) {
      if (kept.has(k)) continue;
      if (2 * (keptChars + lines[k]!.length + 1) > middleChars) break;
      if (tryKeep(k)) keptChars += lines[k]!.length + 1;
    }
  }
  // The first marker says where the rest is; later ones only count.
  let marked = false;
  const gap = (n: number): string[] => {
    if (n <= 0) return [];
    const line = marked
      ? `\u2026 ${n} lines \u2026`
      : `\u2026 ${n} lines omitted (exact output: see the receipt below) \u2026`;
    marked = true;
    return [line];
  };
  const middle: string[] = [];
  let last = i - 1;
  for (const k of [...kept].sort((a, b) => a - b)) {
    middle.push(...gap(k - last - 1), lines[k]!);
    last = k;
  }
  return [...head, ...middle, ...gap(j - last), ...tail].join('\n');
}
