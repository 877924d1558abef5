/**
 * Planning for `collapseDuplicates`: which large tool outputs of a request are shown as a bounded
 * faithful view (too large to show whole; with the focus lines of the conversation before it) and which newly arrived copies of an output are receipts
 * because the newest copy is shown inline in the same request.
 */
import type { RequestView, Slot } from '../model/types.js';
import { codePoints } from '../measure/index.js';
import { withFocusLines } from '../compact/focus.js';
import { scanDiagnostics } from '../compact/diagnostic-lines.js';
import { isFailureLine } from './digest.js';
import { conversationTerms } from './focus.js';
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
  const changes: Managed[] = [];
  for (const p of plan) if (p.render !== 'inline') changes.push(p);
  return changes;
}

/** What {@link planDuplicates} decided: every planned slot, and those that are not inline (its changes). */
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

/**
 * The evidence an earlier request found for this slot of the same item, if any (no await); none
 * when a delivery found its artifact gone since (evidenceOf vaults the content again).
 */
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

async function evidenceOf(
  state: SessionState,
  view: RequestView,
  slot: Slot,
  o: DuplicateOptions,
): Promise<Evidence | null> {
  const item = view.items[slot.item ?? -1];
  const key = evidenceKey(slot, o);
  const holder = typeof item === 'object' && item !== null ? item : undefined;
  // A receipt whose artifact a delivery found gone is not reused: the content is vaulted again.
  const cached = knownEvidence(state, view, slot, o);
  if (cached !== undefined) return cached;
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
  if (holder !== undefined) {
    let map = state.itemMemo.get(holder);
    if (map === undefined) state.itemMemo.set(holder, (map = new Map()));
    map.set(key, found);
  }
  return found;
}

/**
 * One output slot as the session's previous plan saw it: its evidence and the planned slot per
 * rendering. An extended view hands over the previous view's slot objects (src/model/read.ts),
 * and an item's evidence, once found, stays what it was (see knownEvidence).
 */
interface OutputFacts {
  readonly slot: Slot;
  readonly ev: Evidence | null;
  planned?: { [R in PlannedSlot['render']]?: PlannedSlot };
}

type Found = OutputFacts & { readonly ev: Evidence };

/**
 * What planning one request left for the session's next: the outputs it was given (a copy), their
 * facts, and its decisions. `newest` is handed over to the next plan that carries this one.
 */
interface DuplicatePlan {
  readonly outputs: readonly Slot[];
  readonly facts: readonly OutputFacts[];
  /** The facts with evidence, in order, and what each was planned as. */
  readonly found: readonly Found[];
  readonly planned: readonly PlannedSlot[];
  /** The planned slots that are not inline, in order. */
  readonly managed: readonly Managed[];
  /** Artifact id → index in `found` of its newest copy. */
  readonly newest: Map<string, number>;
  /** Indices in `found` that are not the newest copy of their artifact. */
  readonly older: readonly number[];
  /** The options the decisions depend on besides the two predicates. */
  readonly options: string;
}

const OUTPUT_PLAN = 'dedupe:plan';

/** The planned slot of `f` rendered as `render`, built once per output and rendering. */
function plannedAs(f: OutputFacts, render: PlannedSlot['render'], build: () => PlannedSlot): PlannedSlot {
  const planned = (f.planned ??= {});
  return (planned[render] ??= build());
}

const optionsKey = (o: DuplicateOptions): string => `${o.minChars} ${o.maxChars} ${o.maxInlineChars} ${o.viewChars}`;

/** True when `outputs` begins with every slot of `before` (the same objects). */
function extendsOutputs(outputs: readonly Slot[], before: readonly Slot[]): boolean {
  if (outputs.length < before.length) return false;
  for (let k = 0; k < before.length; k++) if (outputs[k] !== before[k]) return false;
  return true;
}

/**
 * Decide every large tool output of a request.
 *
 * Carried: when the request's outputs extend the previous plan's (the same slot objects, so the
 * same items and evidence) and no artifact was found gone since, the previous decisions stand for
 * every output that was, and still is, the newest copy of its artifact: its decision depends on
 * its evidence alone (a view when too large, else inline). Only the new outputs, the older copies
 * (whose decision depends on what arrived with this request and what was a duplicate before) and
 * copies a new output made older are decided again. Anything else takes the full path.
 */
export async function planDuplicates(
  state: SessionState,
  view: RequestView,
  outputs: readonly Slot[],
  o: DuplicateOptions,
): Promise<DuplicatesPlanned> {
  const previous = state.sticky.get(OUTPUT_PLAN) as DuplicatePlan | undefined;
  const carried =
    state.carry &&
    previous !== undefined &&
    previous.options === optionsKey(o) &&
    state.evidence.goneCount === 0 &&
    extendsOutputs(outputs, previous.outputs);
  const added: OutputFacts[] = [];
  let p = 0;
  for (let k = carried ? previous.outputs.length : 0; k < outputs.length; k++) {
    const slot = outputs[k]!;
    if (slot.item === undefined) continue;
    let f = carried ? undefined : previous?.facts[p];
    if (f !== undefined && f.slot === slot) p++;
    // A receipt whose artifact a delivery found gone is not carried: the content is vaulted again.
    if (f === undefined || f.slot !== slot || !reusable(state, f.ev)) {
      const known = knownEvidence(state, view, slot, o);
      f = { slot, ev: known !== undefined ? known : await evidenceOf(state, view, slot, o) };
    }
    added.push(f);
  }
  // Synchronous from here on: a carried plan takes over the previous one's map.
  state.sticky.delete(OUTPUT_PLAN);
  if (carried) state.noteCarried('duplicates');
  const facts = carried ? previous.facts.concat(added) : added;
  const found: Found[] = carried ? previous.found.slice() : [];
  const planned: PlannedSlot[] = carried ? previous.planned.slice() : [];
  const newest = carried ? previous.newest : new Map<string, number>();
  // The newest copy of an artifact stays inline; copies that arrived with this request before it
  // become receipts (the content is visible further down). Copies the conversation already had
  // are left to the history rewrites: replacing them here would break the prompt cache.
  const again: number[] = carried ? previous.older.slice() : [];
  for (const f of added) {
    if (f.ev === null) continue;
    const i = found.length;
    found.push(f as Found);
    const id = f.ev.receipt.artifactId;
    const before = newest.get(id);
    if (carried && before !== undefined) again.push(before); // no longer the newest copy
    newest.set(id, i);
    again.push(i);
  }
  let chain: readonly string[] | undefined;
  const viewOf = (slot: Slot, ev: Evidence): string => {
    chain ??= state.chain.hashes(view.items, (it) => state.meter.measure(it).hash);
    const before = slot.item! > 0 ? chain[slot.item! - 1]! : '';
    if (ev.view?.before !== before) {
      const terms = conversationTerms(view, slot.item!);
      const text = `${withFocusLines(boundedView(ev.display, o.viewChars), ev.display, terms)}\n\n${ev.receipt.text}`;
      ev.view = { before, text };
    }
    return ev.view.text;
  };
  const older: number[] = [];
  let last = -1;
  // The previous changes stand when no earlier output's decision changed: the new ones follow them.
  let managed: Managed[] | undefined = carried ? previous.managed.slice() : undefined;
  for (const i of again.sort((a, b) => a - b)) {
    if (i === last) continue;
    last = i;
    const f = found[i]!;
    const decision = decide(f, newest.get(f.ev.receipt.artifactId) !== i, o, viewOf);
    if (i < planned.length) {
      if (planned[i] !== decision) managed = undefined;
    } else if (decision.render !== 'inline') managed?.push(decision);
    planned[i] = decision;
    if (newest.get(f.ev.receipt.artifactId) !== i) older.push(i);
  }
  managed ??= planChanges(planned);
  state.sticky.set(OUTPUT_PLAN, {
    outputs: outputs.slice(),
    facts,
    found,
    planned,
    managed,
    newest,
    older,
    options: optionsKey(o),
  } satisfies DuplicatePlan);
  return { planned: planned.slice(), managed: managed.slice() };
}

/** What one output with evidence is planned as (`older`: a later copy of its artifact is in the request). */
function decide(
  f: Found,
  older: boolean,
  o: DuplicateOptions,
  viewOf: (slot: Slot, ev: Evidence) => string,
): PlannedSlot {
  const { slot, ev } = f;
  if (older && (o.isNew(slot.item!) || o.wasDuplicate(slot.item!)))
    return plannedAs(f, 'receipt', () => ({
      slot,
      receipt: ev.receipt,
      render: 'receipt',
      duplicate: true,
      text: ev.receipt.text,
    }));
  // The names of the conversation before this output: the same view every request that has the
  // same history before it (a carried planned slot is the same slot, so the same history).
  if (o.maxInlineChars > 0 && ev.chars > o.maxInlineChars)
    return plannedAs(f, 'view', () => ({
      slot,
      receipt: ev.receipt,
      render: 'view',
      duplicate: false,
      text: viewOf(slot, ev),
    }));
  return plannedAs(f, 'inline', () => ({ slot, receipt: ev.receipt, render: 'inline', duplicate: false }));
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
