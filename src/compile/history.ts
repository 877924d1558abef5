/**
 * History rewrites for `compileRequest` (docs/cache-policy.md, docs/fidelity.md). Old tool outputs
 * become a digest plus a receipt; the instruction prefix, every user-authored message and every
 * assistant action stay exactly as they are. A rewrite happens only when the cache-economic rule
 * (src/compile/economics.ts) says the batch pays for the prompt cache it breaks; between rewrites
 * every earlier item renders byte-identically, so compiled request N+1 starts with compiled N.
 *
 * What may be rewritten, and when:
 * - a tool output (or a recognised text-protocol observation) outside the newest
 *   `inlineRecentTurns` turns, at least `minChars` long, that this conversation already saw inline
 *   in `inlineLeases` earlier requests (so nothing is ever replaced before the model saw it);
 * - opt-in (`reasoning`): an old assistant message's prose outside its fenced command blocks;
 * - opt-in (`collapseAfterTurns`): outputs of older turns become bare receipts (no digest) and their
 *   reasoning is reduced, still without touching the prefix, user messages or actions.
 */
import type { PricingProfile } from '../config/pricing.js';
import type { Digests } from '../ledger/digests.js';
import { codePoints } from '../measure/index.js';
import { errorLabel } from '../step.js';
import { sharedLead } from '../model/prefix.js';
import { viewExtends } from '../model/read.js';
import type { RequestView, Slot } from '../model/types.js';
import { createReceipt, isReceipt, referencedArtifacts, renderReceipt } from '../receipts/index.js';
import { shortIdForSha } from '../vault/identity.js';
import { proseChars, REASONING_MIN_CHARS, reasoningRendering } from './actions.js';
import { renderItemAt, renderItems, sortedByItem } from './apply.js';
import type { ConversationMemo } from './conversation.js';
import { renderDigest } from './digest.js';
import { chooseBatch, type RewriteCandidate } from './economics.js';
import { evidenceText } from './evidence.js';
import { editWindowView, readNumberedWindow } from '../compact/edit-window.js';
import { mayBeDelta, parseDelta, slotText } from './references.js';
import type { CompileSettings } from './reduce-request.js';
import type { SessionState, WindowedOutput } from './session.js';
import { sealedSteps, segmentSteps, type Steps } from './steps.js';
import { idleTurns } from './working-set.js';

export interface HistoryOptions extends Pick<
  CompileSettings,
  | 'minChars'
  | 'maxArtifactChars'
  | 'inlineRecentTurns'
  | 'inlineLeases'
  | 'blockTurns'
  | 'requestsAhead'
  | 'digestDiagnosticChars'
  | 'collapseAfterTurns'
  | 'historyPolicy'
  | 'workingSetIdleTurns'
> {
  readonly sessionId: string;
  /** Opt-in reduction of old assistant reasoning. */
  readonly reasoning: boolean;
  readonly pricing: PricingProfile;
  /** false: render the earlier decisions only, choosing no new batch (the gate refused the new one). */
  readonly newBatch: boolean;
}

export type RewriteKind = 'digest' | 'receipt' | 'reasoning';

interface Target {
  readonly key: string;
  readonly kind: RewriteKind;
  /** The slot whose value is replaced (for reasoning: the content path of the assistant item). */
  readonly slot: Slot;
  /** Exact text vaulted for the receipt; undefined when the rendering reuses a receipt the output already ends in. */
  readonly evidence: string | undefined;
  /** The artifact the rendering names. */
  readonly artifactId: string;
  readonly toolName: string;
  /** The replacement text. */
  readonly text: string;
}

/** A target as the session memo keeps it (the slot is the current request's). */
type Stored = Omit<Target, 'slot'>;

/** The session memo's key of an output's rendering of one kind. */
const targetKey = (kind: RewriteKind, key: string): string => `history:${kind}:${key}`;

export interface HistoryPlan {
  readonly items: readonly unknown[];
  /** The receipts `items` name (this request's: the session's next plan extends the list in place). */
  readonly receipts: readonly { readonly artifactId: string; readonly verified: boolean }[];
  /** Rewrites decided by this request (persist them once the request is accepted). */
  readonly decided: readonly { readonly key: string; readonly kind: RewriteKind }[];
  /** Keys of the outputs this request shows inline (mark them shown once it goes out). */
  readonly shown: readonly string[];
  /** For a delta of a changed output at this slot path (JSON): the key to mark shown once sent resolved. */
  readonly fullShown: (path: string) => string | undefined;
  readonly requestKey: string;
  readonly rewrittenOutputs: number;
  readonly reducedReasoning: number;
  readonly batch: boolean;
  /** Renderings dropped because the vault could not store (or no longer has) their artifact. */
  readonly failed: number;
  /** Content-free label of the first such error. */
  readonly failure?: string;
}

/** What planning found about one output slot, reused while the next view hands over the same slot object. */
export interface OutputFacts {
  readonly slot: Slot;
  readonly chain: string;
  readonly key: string;
  /** Code points of the slot's text (-1: it has none), once needed. */
  chars?: number;
  /** The rendering per kind once looked up (null: cannot be rendered). */
  readonly targets: { [K in RewriteKind]?: Target | null };
  /** Whether the slot is a delta of a changed output, once needed. */
  changed?: boolean;
  /**
   * The output's decision once no later request of the session can change it (`settle` in
   * {@link outputDecider}), with the settings it was decided under: carried, not decided again.
   */
  settled?: Settled;
}

/** The settings a settled decision holds for. */
type Settings = Pick<HistoryOptions, 'minChars' | 'collapseAfterTurns'>;

/** Whether a decision settled under `x` holds under `o`. */
const holds = (x: Settings | undefined, o: Settings): boolean =>
  x?.minChars === o.minChars && x.collapseAfterTurns === o.collapseAfterTurns;

/** A final decision: the outcome, its rendering (APPLIED), and the settings it holds for. */
interface Settled extends Settings {
  readonly code: Outcome;
  readonly picked: Target | undefined;
}

/**
 * The key counting the requests that showed a changed output in full where the conversation holds
 * a delta of it: a digest of a diff would name content no request showed inline.
 */
const fullShownKey = (key: string): string => `${key}|full`;

/** Whether the output is a temporal delta of an output that changed (a diff, not "no changes"). */
function changedDelta(f: OutputFacts): boolean {
  if (f.changed === undefined) {
    const d = mayBeDelta(f.slot.value) ? parseDelta(slotText(f.slot.value) ?? '') : undefined;
    f.changed = d !== undefined && d.current !== d.previous;
  }
  return f.changed;
}

/** The key of an output in the conversation: its item's chain hash and its path in the item. */
const factKey = (chain: string, slot: Slot): string => `${chain}|${JSON.stringify(slot.path.slice(2))}`;

/** What planning decided for one output; SHOWN_AGAIN, UPGRADED and CANDIDATE are decided again by every request. */
const APPLIED = 1; // an earlier rewrite: `picked` is its rendering
const UPGRADED = 2; // APPLIED, and `upgrades` the bare receipt it may become
const UNRENDERABLE = 3; // an earlier rewrite that cannot be rendered any more: inline
const SHOWN = 4; // inline, and stays so: too small, or no rendering
const SHOWN_AGAIN = 5; // inline: among the newest turns, not sealed, or not shown the lease count of times yet
const CANDIDATE = 6; // inline, and a candidate for a new batch: `picked` is its rendering
type Outcome = number;

/** The output being decided (one at a time, in output order). */
interface Decided {
  code: Outcome;
  picked: Target | undefined;
  upgrade: Target | undefined;
}

/** The artifact id `text` is vaulted under, from the session's digest ledger (hashed once per text). */
const artifactOf = (digests: Digests, text: string): string => shortIdForSha(digests.of(text));

/** The receipt line of `text` (content-addressed: the id is its SHA-256 prefix, so no digest field). */
function localReceipt(digests: Digests, text: string, toolName: string): string {
  return renderReceipt(createReceipt(artifactOf(digests, text), toolName, codePoints(text)));
}

/** The assistant text slot(s) a reasoning rewrite replaces: a string content, or text blocks. */
export function reasoningSlots(slot: Slot): { slot: Slot; text: string }[] {
  const content = (slot.value as { content?: unknown }).content;
  if (typeof content === 'string')
    return [{ slot: { ...slot, path: [...slot.path, 'content'], value: content }, text: content }];
  if (!Array.isArray(content)) return [];
  const out: { slot: Slot; text: string }[] = [];
  content.forEach((part, j) => {
    const p = part as { type?: unknown; text?: unknown };
    if ((p.type === 'text' || p.type === 'output_text') && typeof p.text === 'string')
      out.push({ slot: { ...slot, path: [...slot.path, 'content', j, 'text'], value: p.text }, text: p.text });
  });
  return out;
}

/** Plan the history of one request. Undefined when the request has no history to speak of. */
export async function planHistory(
  state: SessionState,
  memo: ConversationMemo,
  view: RequestView,
  outputs: readonly Slot[],
  o: HistoryOptions,
): Promise<HistoryPlan | undefined> {
  const bounds = historyBounds(state, view, o);
  if (bounds === undefined) return undefined;
  const { start } = bounds;
  const chain = state.chain.hashes(view.items, (it) => state.meter.measure(it).hash);
  const requestKey = chain.at(-1) ?? '';
  // The fixed-block opt-in keeps its own schedule: the working set applies to the cache-economic rule.
  const idle = o.historyPolicy === 'working-set' && o.blockTurns === 0 ? idleTurns(state, view, outputs) : undefined;
  const past = sessionPast(state);
  const { applied, candidates, shown, facts, returned } = await decideOutputs(state, memo, outputs, o, {
    ...bounds,
    requestKey,
    idle,
    chain,
    idleLimit: workingSetIdleLimit(past, o.workingSetIdleTurns),
    past,
  });
  for (const key of returned) past.returned.add(key);
  if (o.reasoning || o.collapseAfterTurns > 0)
    await reasoningDecisions(
      state.meter.digests,
      memo,
      view,
      o,
      { ...bounds, requestKey, chain },
      { applied, shown, candidates },
    );

  // The history as it would be sent without a new rewrite: earlier rewrites applied.
  // Edit results shown reduced against an earlier output still in view (they are part of the kept history).
  const { targets: keptEdits, bases } = editWindowTargets(state, outputs, applied, start);
  const keepItems =
    renderItems(state, view, keptEdits.length === 0 ? applied : byItemOrder([...applied, ...keptEdits])) ?? view.items;
  let chosen: Target[] = [];
  if (candidates.length > 0 && o.newBatch) {
    // An earlier output an edit result's view names goes only with that edit result: hiding it
    // alone would show the edit result whole again.
    const open = new Set(candidates.map((c) => JSON.stringify(c.slot.path)));
    const eligible = candidates.filter((c) => {
      const dependent = bases.get(JSON.stringify(c.slot.path));
      return dependent === undefined || open.has(dependent);
    });
    chosen =
      o.blockTurns > 0
        ? eligible
        : chooseNewBatch(state, view, outputs, o, { keepItems, candidates: eligible, idle, turns: bounds.runs, past });
  }

  const chosenKeys = new Set(chosen.map((c) => c.key));
  // Only a bare receipt chosen for a digested output (the collapse opt-in) replaces an applied rendering.
  const kept = chosen.some((c) => c.kind === 'receipt') ? applied.filter((x) => !chosenKeys.has(x.key)) : applied;
  const rewritten = chosen.length === 0 ? applied : kept.concat(chosen);
  const edits = editWindowTargets(state, outputs, rewritten, start).targets;
  const order = edits.length === 0 ? rewritten : [...rewritten, ...edits];
  const { receipts, final, dropped, failure } = await receiptsOf(state, order, o);
  for (const key of dropped) chosen = chosen.filter((c) => c.key !== key);
  // Without a new batch or a failure the final renderings are the kept ones.
  const items =
    final.length === 0
      ? view.items
      : chosen.length === 0 && final.length === applied.length
        ? keepItems
        : (renderItems(state, view, byItemOrder(final)) ?? view.items);
  const decidedKeys = new Set(chosen.map((c) => c.key));
  let reducedReasoning = 0;
  for (const t of final) if (t.kind === 'reasoning') reducedReasoning++;
  return {
    items,
    receipts,
    decided: chosen.map((c) => ({ key: c.key, kind: c.kind })),
    shown: decidedKeys.size === 0 ? shown : shown.filter((k) => !decidedKeys.has(k)),
    fullShown: (path) => {
      const f = facts.find((f) => JSON.stringify(f.slot.path) === path && changedDelta(f));
      return f && fullShownKey(f.key);
    },
    requestKey,
    rewrittenOutputs: final.length - reducedReasoning,
    reducedReasoning,
    batch: chosen.length > 0,
    failed: dropped.length,
    ...(failure === undefined ? {} : { failure }),
  };
}

/** Renderings in item order (stable), as src/compile/apply.ts renders from the previous request's. */
const byItemOrder = (list: readonly Target[]): readonly Target[] =>
  sortedByItem(list) ? list : [...list].sort((a, b) => a.slot.item! - b.slot.item!);

/** The history key of an edit result's first view (decided anew per request, never persisted). */
const editKey = (slot: Slot): string => `edit:${JSON.stringify(slot.path)}`;

/**
 * First views of edit results that re-print a numbered window of a file an earlier output still
 * shown inline prints too (src/compact/edit-window.ts): the rows the earlier output shows are
 * named, the rest stays, the receipt of the full result follows. A function of the request: when
 * the earlier output is rewritten, the edit result is shown whole again (it comes after the earlier
 * output, so the prompt cache it breaks is broken already).
 */
function editWindowTargets(
  state: SessionState,
  outputs: readonly Slot[],
  rewritten: readonly Target[],
  start: number,
): { targets: Target[]; bases: Map<string, string> } {
  // Built on the first numbered window: a session without one pays nothing per past output.
  let hidden: Set<string> | undefined;
  const latest = new Map<string, { slot: Slot; text: string }>();
  const targets: Target[] = [];
  /** Path of an edit result shown reduced, by the path of the earlier output it names (JSON). */
  const bases = new Map<string, string>();
  for (const { k, window } of windowedOutputs(state, outputs)) {
    const slot = outputs[k]!;
    if (slot.item === undefined || slot.item < start) continue;
    const text = slot.value as string;
    hidden ??= new Set(rewritten.map((t) => JSON.stringify(t.slot.path)));
    if (hidden.has(JSON.stringify(slot.path))) continue;
    const earlier = latest.get(window.path);
    // What the next edit result may name is what this one shows (its reduced view, if it gets one).
    latest.set(window.path, { slot, text });
    if (earlier === undefined || !EDITED.test(text)) continue;
    const call = earlier.slot.callId === undefined ? '' : ` (call ${earlier.slot.callId})`;
    const view = editWindowView(text, earlier.text, `the earlier ${earlier.slot.toolName ?? 'tool'} output${call}`);
    if (view === undefined || codePoints(text) - codePoints(view) < EDIT_MIN_SAVED) continue;
    const toolName = slot.toolName ?? 'tool';
    const shown = `${view}\n${localReceipt(state.meter.digests, text, toolName)}`;
    latest.set(window.path, { slot, text: shown });
    bases.set(JSON.stringify(earlier.slot.path), JSON.stringify(slot.path));
    targets.push({
      key: editKey(slot),
      kind: 'digest',
      slot,
      evidence: text,
      artifactId: artifactOf(state.meter.digests, text),
      toolName,
      text: shown,
    });
  }
  return { targets, bases };
}

/**
 * Indexes of the outputs that print a numbered window, each slot read once per session: the run
 * of outputs the previous call shares (the same slot objects) keeps its answer, so a long history
 * is compared, not looked up again (`outputs`, the request's own list, never changed, is kept).
 */
function windowedOutputs(state: SessionState, outputs: readonly Slot[]): readonly WindowedOutput[] {
  const windows = (state.memo.editWindows ??= new WeakMap());
  const last = state.memo.windowed;
  const n = last === undefined ? 0 : sharedLead(outputs, last.outputs, undefined);
  const at = last === undefined ? [] : last.at.filter((w) => w.k < n);
  for (let k = n; k < outputs.length; k++) {
    const slot = outputs[k]!;
    if (typeof slot.value !== 'string' || isReceipt(slot.value)) continue;
    let window = windows.get(slot);
    if (window === undefined) windows.set(slot, (window = readNumberedWindow(slot.value) ?? null));
    if (window !== null) at.push({ k, window });
  }
  state.memo.windowed = { outputs, at };
  return at;
}

/** Code points an edit result's reduced view must save to be shown instead of the result (a few lines do not pay for the note and receipt). */
const EDIT_MIN_SAVED = 1000;

/** An editor's word that the window below shows the file after its edit. */
const EDITED = /has been edited|File updated|edited successfully/;

/** The boundaries a request's history is decided at; undefined when it has no history (no assistant item). */
interface HistoryBounds extends Pick<Steps, 'runs'> {
  /** The first assistant item: everything before it is the instruction prefix. */
  readonly start: number;
  /** Items from here on (the newest turns) are never rewritten. */
  readonly protectedFrom: number;
  /** Items before it are past the collapse horizon (a bare receipt is wanted). */
  readonly collapseBefore: number;
  /** Items before it are sealed in fixed blocks (the fixed-block policy). */
  readonly sealedBefore: number;
}

function historyBounds(state: SessionState, view: RequestView, o: HistoryOptions): HistoryBounds | undefined {
  const info = view.itemInfo;
  const start = info.findIndex((i) => i.role === 'assistant');
  if (start === -1 || view.listKey === undefined) return undefined;
  const last = state.memo.steps;
  const steps = segmentSteps(
    info,
    last !== undefined && (last.view === view || viewExtends(view, last.view)) ? last.steps : undefined,
  );
  state.memo.steps = { view, steps };
  const count = steps.starts.length;
  const protectedFrom = steps.starts[Math.max(0, count - o.inlineRecentTurns)] ?? view.items.length;
  const collapseBefore =
    o.collapseAfterTurns > 0 && count > o.collapseAfterTurns ? steps.starts[count - o.collapseAfterTurns]! : 0;
  const sealed = o.blockTurns > 0 ? sealedSteps(count, o.blockTurns, o.inlineRecentTurns) : count;
  const sealedBefore = steps.starts[sealed] ?? view.items.length;
  return { start, protectedFrom, collapseBefore, sealedBefore, runs: steps.runs };
}

/** What a request's outputs are: rewritten earlier (`applied`), shown (their keys), or candidates for a new batch. */
interface OutputDecisions {
  readonly applied: Target[];
  readonly candidates: Target[];
  readonly shown: string[];
  readonly facts: readonly OutputFacts[];
  /** Keys of rewritten outputs the newest turn referred to again (the agent came back to them). */
  readonly returned: string[];
}

/** A request's decisions in output order: what it found per output (`facts`, reused for the same slot objects), its rewrites and the outputs it shows. */
interface Lists {
  readonly facts: OutputFacts[];
  readonly applied: Target[];
  /** The index in the request's outputs of each of `applied`. */
  readonly appliedAt: number[];
  readonly shown: string[];
}

/**
 * A plan's lists with the run of outputs older than its newest turns, ending at `ends` in
 * `outputs` and the lists: the next request of the same outputs, conversation, prefix and
 * settings, with the run (last item `lastItem`, -1: none) still older than its newest turns, takes
 * the lists up to `ends` as they are (extended in place) and decides again only the `holes`
 * (unsettled outputs, at their marks).
 */
export interface SettledRun extends Lists {
  /** The previous request's outputs (its own list, never changed: kept, not copied). */
  readonly outputs: readonly Slot[];
  /** The chain hash of item `lastItem`: a hash chain, so it stands for every item up to it. */
  readonly lastHash: string | undefined;
  readonly ends: Marks;
  readonly holes: readonly Marks[];
  readonly lastItem: number;
  readonly start: number;
  readonly settings: Settings;
}

/** Positions in a run's `outputs`, `facts`, `applied` and `shown`. */
type Marks = readonly [number, number, number, number];

/** The run `run` carries for this request's decisions: the same outputs, chain, prefix and settings, the run still old. */
function carriedRun(
  run: SettledRun | undefined,
  outputs: readonly Slot[],
  o: HistoryOptions,
  b: HistoryBounds & { readonly chain: readonly string[] },
): SettledRun | undefined {
  if (run === undefined || run.start !== b.start || !holds(run.settings, o) || run.lastItem >= b.protectedFrom)
    return undefined;
  const [k] = run.ends;
  if (outputs.length < k || b.chain[run.lastItem] !== run.lastHash) return undefined;
  for (let x = 0; x < k; x++) if (outputs[x] !== run.outputs[x]) return undefined;
  return run;
}

/** `list` with its entries `from`..`to` (an output's earlier decision) replaced by `x` (none: undefined); the end of `x` in it. */
function put<T>(list: T[], from: number, to: number, x: T | undefined): number {
  const n = x === undefined ? 0 : 1;
  if (to - from === n || from === list.length) {
    if (x !== undefined) list[from] = x;
  } else list.splice(from, to - from, ...(x === undefined ? [] : [x]));
  return from + n;
}

type Bounds = HistoryBounds & {
  readonly requestKey: string;
  readonly idle: readonly number[] | undefined;
  readonly chain: readonly string[];
  readonly idleLimit: number;
  readonly past: SessionPast;
};

/**
 * Decide every output of the request, in output order (see {@link outputDecider}). The carried
 * run's lists become this request's, extended in place: its holes are decided again where they
 * stand, the outputs after its end onto the end (a request walks the new and unsettled outputs).
 */
async function decideOutputs(
  state: SessionState,
  memo: ConversationMemo,
  outputs: readonly Slot[],
  o: HistoryOptions,
  b: Bounds,
): Promise<OutputDecisions> {
  const old = state.memo.settledRun;
  // Taken out while its lists change: a plan that throws leaves no half-changed run behind.
  delete state.memo.settledRun;
  const run = carriedRun(old, outputs, o, b);
  const l: Lists = run ?? { facts: [], applied: [], appliedAt: [], shown: [] };
  // The facts after the run are decided again (reused for the same slots), from `p` on.
  const previous = run === undefined ? (old?.facts ?? []) : l.facts.splice(run.ends[1]);
  let p = 0;
  if (run !== undefined) {
    l.applied.length = run.ends[2];
    l.appliedAt.length = run.ends[2];
    l.shown.length = run.ends[3];
  }
  const d = placer(outputDecider(state, memo, o, b), l, o, b);
  if (run !== undefined) {
    for (const h of run.holes) await d.decide(h[0], l.facts[h[1]]!, outputs[h[0]]!.item!, h);
    [d.ends, d.lastItem] = [[run.ends[0], l.facts.length, l.applied.length, l.shown.length], run.lastItem];
  }
  for (let k = d.ends[0]; k < outputs.length; k++) {
    const slot = outputs[k]!;
    const i = slot.item;
    if (i === undefined || i <= b.start) {
      if (d.ends[0] === k) d.ends = [k + 1, d.ends[1], d.ends[2], d.ends[3]];
      continue;
    }
    let f = previous[p];
    if (f !== undefined && f.slot === slot && f.chain === b.chain[i]) p++;
    else f = { slot, chain: b.chain[i]!, key: factKey(b.chain[i]!, slot), targets: {} };
    await d.decide(k, f, i);
  }
  const returned: string[] = [];
  if (b.idle !== undefined) l.appliedAt.forEach((k, x) => b.idle![k] === 0 && returned.push(l.applied[x]!.key));
  const { ends, holes, lastItem } = d;
  state.memo.settledRun = {
    ...l,
    outputs,
    lastHash: b.chain[lastItem],
    ends,
    holes,
    lastItem,
    start: b.start,
    settings: o,
  };
  return { ...l, candidates: d.candidates, returned };
}

/**
 * `decide(k, f, i, hole)`: output `k` (fact `f`, item `i`) decided into the lists, at their end or
 * in place of its earlier decision at `hole` (entries after a hole decided otherwise move by
 * `moved`); `ends`, `lastItem` and `holes` follow the run of old outputs decided in order.
 */
function placer(decider: ReturnType<typeof outputDecider>, l: Lists, o: HistoryOptions, b: Bounds) {
  const { decided, visit } = decider;
  const p = { ends: [0, 0, 0, 0] as Marks, lastItem: -1, holes: [] as Marks[], candidates: [] as Target[], decide };
  const moved = [0, 0];
  async function decide(k: number, f: OutputFacts, i: number, hole?: Marks): Promise<void> {
    const held = f.settled;
    if (held !== undefined && i < b.protectedFrom && holds(held, o))
      [decided.code, decided.picked, decided.upgrade] = [held.code, held.picked, undefined];
    else {
      b.past.visits++;
      const pending = visit(k, f, i);
      if (pending !== undefined) await pending;
    }
    const { code, picked, upgrade } = decided;
    const rewrite = code === APPLIED || code === UPGRADED ? picked! : undefined;
    if (rewrite !== undefined) b.past.rewritten.add(rewrite.key);
    if (upgrade !== undefined) p.candidates.push(upgrade);
    if (code === CANDIDATE) p.candidates.push(picked!);
    const fi = hole?.[1] ?? l.facts.push(f) - 1;
    const [ai, si] =
      hole === undefined ? [l.applied.length, l.shown.length] : [hole[2] + moved[0]!, hole[3] + moved[1]!];
    // The hole's earlier entries, if any (a key names one output).
    const [ai2, si2] = [l.appliedAt[ai] === k ? ai + 1 : ai, l.shown[si] === f.key ? si + 1 : si];
    put(l.appliedAt, ai, ai2, rewrite && k);
    const after = [
      put(l.applied, ai, ai2, rewrite),
      put(l.shown, si, si2, rewrite || code === UNRENDERABLE ? undefined : f.key),
    ] as const;
    [moved[0], moved[1]] = [moved[0]! + after[0] - ai2, moved[1]! + after[1] - si2];
    if (hole === undefined && (p.ends[0] !== k || i >= b.protectedFrom)) return;
    // A decision that is not the settled one (none, or a stale one) is decided again next time.
    if (!holds(f.settled, o)) p.holes.push([k, fi, ai, si]);
    [p.ends, p.lastItem] = [[k + 1, fi + 1, ...after], i];
  }
  return p;
}

type Pending = Promise<unknown> | undefined;

/** `visit(k, f, i)` decides output `k` into `decided`, synchronously while the memo's answers are known. */
function outputDecider(
  state: SessionState,
  memo: ConversationMemo,
  o: HistoryOptions,
  b: Bounds,
): { readonly decided: Decided; readonly visit: (k: number, f: OutputFacts, i: number) => Pending } {
  const { protectedFrom, collapseBefore, sealedBefore, requestKey, idle, idleLimit } = b;
  const targetOf = async (f: OutputFacts, kind: RewriteKind): Promise<Target | undefined> => {
    const t = knownTarget(state, f.slot, f.key, kind) ?? (await outputTarget(state, f.slot, f.key, kind, o)) ?? null;
    f.targets[kind] = t;
    return t ?? undefined;
  };
  const decided: Decided = { code: SHOWN_AGAIN, picked: undefined, upgrade: undefined };
  const visit = (k: number, f: OutputFacts, i: number): Pending => {
    [decided.code, decided.picked, decided.upgrade] = [SHOWN_AGAIN, undefined, undefined];
    // The newest outputs are never rewritten, whatever another process decided for this key.
    const known = i < protectedFrom ? memo.rewritten(f.key) : undefined;
    return known instanceof Promise
      ? known.then((kind) => withKind(k, f, i, kind as RewriteKind | undefined))
      : withKind(k, f, i, known as RewriteKind | undefined);
  };
  const withKind = (k: number, f: OutputFacts, i: number, kind: RewriteKind | undefined): Pending => {
    const want: RewriteKind = i < collapseBefore ? 'receipt' : 'digest';
    if (kind !== undefined) {
      const cached = f.targets[kind];
      return cached !== undefined
        ? rewritten(f, i, kind, want, cached)
        : targetOf(f, kind).then((t) => rewritten(f, i, kind, want, t));
    }
    if (i >= protectedFrom) return undefined;
    if (f.chars === undefined) {
      const text = slotText(f.slot.value);
      f.chars = text === undefined ? -1 : codePoints(text);
    }
    // Too small to rewrite, never rewritten: inline for good, whatever its idle turns and leases.
    // (A changed output's delta is measured by the output it stands for, in `candidate`.)
    if (f.chars < o.minChars && !changedDelta(f)) return settle(f, SHOWN, undefined);
    if (i >= sealedBefore) return undefined;
    // Still in the agent's working set: decided again by the next request.
    if (idle !== undefined && idle[k]! < idleLimit) return undefined;
    const before = memo.shownBefore(changedDelta(f) ? fullShownKey(f.key) : f.key, requestKey);
    return before instanceof Promise ? before.then((n) => leased(k, f, want, n)) : leased(k, f, want, before);
  };
  const rewritten = (
    f: OutputFacts,
    i: number,
    kind: RewriteKind,
    want: RewriteKind,
    target?: Target | null,
  ): Pending => {
    if (target === null || target === undefined) return settle(f, UNRENDERABLE, undefined); // it stays inline
    // Without the collapse opt-in a rewrite never changes again.
    if (kind !== 'digest' || o.collapseAfterTurns <= 0) return settle(f, APPLIED, target);
    decided.picked = target;
    decided.code = APPLIED;
    // Entered the collapse horizon since it was digested: a candidate for the bare receipt.
    if (want !== 'receipt' || i >= sealedBefore) return undefined;
    decided.code = UPGRADED;
    return outputTarget(state, f.slot, f.key, 'receipt', o).then((upgrade) => (decided.upgrade = upgrade));
  };
  /**
   * A decision no later request can change while the output is the same slot of the same
   * conversation, older than the newest turns, under the same settings: only a chosen candidate is
   * rewritten (and a rewrite changes again only under the collapse opt-in).
   */
  const settle = (f: OutputFacts, code: Outcome, picked: Target | undefined): undefined => {
    decided.code = code;
    decided.picked = picked;
    f.settled = { code, picked, minChars: o.minChars, collapseAfterTurns: o.collapseAfterTurns };
    return undefined;
  };
  const leased = (k: number, f: OutputFacts, want: RewriteKind, before: number): Pending => {
    if (before < o.inlineLeases) return undefined;
    decided.code = SHOWN;
    const cached = f.targets[want];
    return cached !== undefined ? candidate(f, cached) : targetOf(f, want).then((t) => candidate(f, t));
  };
  const candidate = (f: OutputFacts, target: Target | null | undefined): Pending => {
    if (target === null || target === undefined) return undefined;
    if (f.changed === true && codePoints(target.evidence ?? '') < o.minChars) return undefined;
    decided.picked = target;
    decided.code = CANDIDATE;
    return undefined;
  };
  return { decided, visit };
}

/** The reasoning parts of the assistant items: applied earlier, shown, or candidates for a new batch. */
async function reasoningDecisions(
  digests: Digests,
  memo: ConversationMemo,
  view: RequestView,
  o: HistoryOptions,
  b: HistoryBounds & { readonly requestKey: string; readonly chain: readonly string[] },
  out: { readonly applied: Target[]; readonly shown: string[]; readonly candidates: Target[] },
): Promise<void> {
  for (const slot of view.slots) {
    const i = slot.item;
    if (slot.kind !== 'assistant' || i === undefined || i < b.start) continue;
    for (const part of reasoningSlots(slot)) {
      const key = `${b.chain[i]!}|${JSON.stringify(part.slot.path.slice(2))}|reasoning`;
      const target = reasoningTarget(digests, part, key);
      if (target === undefined) continue;
      if ((await memo.rewritten(key)) !== undefined) {
        out.applied.push(target);
        continue;
      }
      out.shown.push(key);
      const eligible = (o.reasoning || i < b.collapseBefore) && i < b.protectedFrom && i < b.sealedBefore;
      if (eligible && (await memo.shownBefore(key, b.requestKey)) >= 1) out.candidates.push(target);
    }
  }
}

/**
 * The candidates of a new batch under the cache-economic rule: the items from where a rewrite
 * pays for the prompt-cache loss it causes (and the recoveries it may force) to the end, or none.
 */
function chooseNewBatch(
  state: SessionState,
  view: RequestView,
  outputs: readonly Slot[],
  o: HistoryOptions,
  c: {
    readonly keepItems: readonly unknown[];
    readonly candidates: readonly Target[];
    readonly idle: readonly number[] | undefined;
    readonly turns: number;
    readonly past: SessionPast;
  },
): Target[] {
  const { keepItems, candidates, idle, turns, past } = c;
  const info = view.itemInfo;
  // Item i starts at 1 + Σ (chars + 2) of the items before it (running sums from the meter).
  const cum = state.meter.cumulativeChars(keepItems);
  const before = (i: number): number => (i === 0 ? 0 : cum[i - 1]!);
  const position = (i: number): number => 1 + before(i) + 2 * i;
  const byItem = new Map<number, Target[]>();
  for (const c of candidates) byItem.set(c.slot.item!, [...(byItem.get(c.slot.item!) ?? []), c]);
  const itemsInOrder = [...byItem.keys()].sort((a, b) => a - b);
  // One item rendered at a time (copying the whole list per candidate made this quadratic).
  const withChanges = (i: number): unknown => {
    const rendered = renderItemAt(state, keepItems, i, byItem.get(i)!);
    if (rendered === undefined) throw new TypeError(`item ${i}: a candidate that changes nothing`);
    return rendered;
  };
  const size = 1 + before(keepItems.length) + 2 * keepItems.length;
  // The fewest idle turns of the outputs of each item (an item with several is as busy as its busiest).
  const idleOf = new Map<number, number>();
  if (idle !== undefined)
    outputs.forEach(({ item: i }, k) => {
      if (i !== undefined && byItem.has(i)) idleOf.set(i, Math.min(idleOf.get(i) ?? Infinity, idle[k]!));
    });
  const list: RewriteCandidate[] = itemsInOrder.map((i) => {
    const itemChars = cum[i]! - before(i);
    const saved = itemChars - state.meter.measure(withChanges(i)).chars;
    const turns = idleOf.get(i);
    return turns === undefined
      ? { position: position(i), saved }
      : { position: position(i), saved, recovery: expectedRecovery(o.pricing, size, itemChars, turns, past) };
  });
  let runStart = info.length - 1;
  while (runStart > 0 && info[runStart]!.role !== 'assistant') runStart--;
  while (runStart > 0 && info[runStart - 1]!.role === 'assistant') runStart--;
  const answer = chooseBatch({
    size,
    cachedEnd: runStart < keepItems.length ? position(runStart) : size,
    requestsAhead: o.requestsAhead > 0 ? o.requestsAhead : Math.max(1, turns),
    pricing: o.pricing,
    candidates: list,
  });
  return answer === undefined ? [] : itemsInOrder.slice(answer.from).flatMap((i) => byItem.get(i)!);
}

/** What {@link receiptsOf} found: the receipts and renderings that can be named, and the keys of those that cannot. */
interface Receipts {
  readonly receipts: { artifactId: string; verified: boolean }[];
  readonly final: Target[];
  readonly dropped: string[];
  readonly failure: string | undefined;
}

/** The receipt of each rendering in `order`; one whose artifact cannot be stored or found is dropped (stays inline). */
async function receiptsOf(state: SessionState, order: readonly Target[], o: HistoryOptions): Promise<Receipts> {
  // The leading run of the previous request's renderings keeps their receipts while none is found gone.
  const last = state.memo.receipted;
  let n = 0;
  const gone = state.evidence.anyGone() ? state.evidence.isGone : () => false;
  while (n < order.length && order[n] === last?.final[n] && !gone(last!.receipts[n]!.artifactId)) n++;
  // The previous request's lists are this one's up to `n` (extended in place: no request keeps them).
  const { final, receipts }: Pick<Receipts, 'final' | 'receipts'> =
    n === 0 ? { final: [], receipts: [] } : (last as Receipts);
  final.length = receipts.length = n;
  const dropped: string[] = [];
  let failure: string | undefined;
  // The texts of those below without a standing receipt: those no recent request vaulted are stored in one write.
  const stale = (r?: { artifactId: string }) => r === undefined || state.evidence.isGone(r.artifactId);
  const texts = order.slice(n).filter((t) => t.evidence !== undefined && stale(state.targetReceipts.get(t)));
  const items = texts.map((t) => ({
    text: t.evidence!,
    meta: { toolName: t.toolName, sessionId: o.sessionId, ...(t.slot.callId ? { callId: t.slot.callId } : {}) },
  }));
  const got = items.length === 0 ? [] : await state.evidence.receipts(items).catch((e: Error) => items.map(() => e));
  const putOf = new Map(texts.map((t, j) => [t, got[j]!]));
  for (let k = n; k < order.length; k++) {
    const t = order[k]!;
    try {
      let r = state.targetReceipts.get(t);
      // The receipt an earlier request got for this rendering stands while its artifact is not
      // found gone (a long history is not looked up again per request).
      if (r === undefined || state.evidence.isGone(r.artifactId)) {
        if (t.evidence === undefined) {
          const ok = verifiedNow(state, t.artifactId) || (await verifiedOnce(state, t.artifactId));
          if (!ok) throw new Error('artifact gone');
          r = { artifactId: t.artifactId, verified: true };
        } else {
          const put = putOf.get(t)!;
          if (put instanceof Error) throw put;
          r = put;
          // Content-addressed: the stored id is the one rendered, except on a 128-bit prefix collision.
          if (r.artifactId !== t.artifactId)
            throw new Error('artifact id differs from the rendered one (prefix collision)');
        }
        state.targetReceipts.set(t, r);
      }
      receipts.push(r);
      final.push(t);
    } catch (error) {
      dropped.push(t.key); // this item stays inline (and undecided); the others still go ahead
      failure ??= errorLabel(error);
    }
  }
  state.memo.receipted = { final, receipts };
  return { receipts, final, dropped, failure };
}

/**
 * The outputs this session had rewritten so far, and those the agent came back to afterwards
 * (src/compile/working-set.ts); decided from requests already sent, so the same history gives the same answer.
 */
export interface SessionPast {
  readonly rewritten: Set<string>;
  readonly returned: Set<string>;
  /** Outputs the session's plans decided by visiting them (a settled decision is carried, not visited). */
  visits: number;
}

/** What the rewrite rule reads of a session's past. */
type PastRecord = Pick<SessionPast, 'rewritten' | 'returned'>;

function sessionPast(state: SessionState): SessionPast {
  return (state.memo.past ??= { rewritten: new Set(), returned: new Set(), visits: 0 });
}

/** Outputs the session's history plans visited so far: a request visits its unsettled outputs only. */
export function visitedOutputs(state: SessionState): number {
  return sessionPast(state).visits;
}

/**
 * Weight, in rewritten outputs, of the prior that a session comes back to what was digested as
 * often as the idle turns alone suggest; the session's own record outweighs it once it has more.
 */
const PRIOR_OUTPUTS = 4;

/**
 * The chance that the agent comes back for an output it has not referred to for `idle` turns:
 * 1 / (idle + 1) before the session has a record (the longer it has been left, the less likely it
 * is needed), then moved toward the share of its rewritten outputs it did come back to.
 */
export function returnChance(idle: number, past?: PastRecord): number {
  const prior = 1 / (idle + 1);
  if (past === undefined) return prior;
  return (past.returned.size + PRIOR_OUTPUTS * prior) / (past.rewritten.size + PRIOR_OUTPUTS);
}

/**
 * The working set's idle limit for this session, judged from its own past: the configured limit
 * while the session has a short record (fewer than {@link PRIOR_OUTPUTS} rewrites), then one turn
 * more for a session that came back to a fifth or more of what was rewritten, two for one that came
 * back to half or more of it, and one turn less (at least 1) for one that never came back over a
 * longer record. (A fifth, not half: with the lean default of 1 turn, an agent that returns to one
 * output in five already pays a recovery round trip, a model call and a page written at full price,
 * more often than the shorter history saves; on corpus E's long sessions the adaptive limit kept
 * 97.9 % of the lines in sight where a fixed 1 kept 97.7 %, at a lower cost.)
 */
export function workingSetIdleLimit(past: PastRecord, configured = 1): number {
  const base = Math.max(1, configured);
  const n = past.rewritten.size;
  if (n < PRIOR_OUTPUTS) return base;
  const share = past.returned.size / n;
  // A long record of never coming back: the agent is done with what it leaves.
  if (n >= 2 * PRIOR_OUTPUTS && share < 0.05) return Math.max(1, base - 1);
  return share >= RETURN_SHARE_TWO ? base + 2 : share >= RETURN_SHARE_ONE ? base + 1 : base;
}

/** Share of its rewritten outputs a session came back to from which the idle limit is one turn longer. */
export const RETURN_SHARE_ONE = 0.2;
/** Share from which it is two turns longer. */
export const RETURN_SHARE_TWO = 0.5;

/**
 * Expected cost of the recoveries a digest of an item may cause (uncached-char units): the chance
 * that the agent comes back for it ({@link returnChance}: its idle turns and the session's record),
 * times one round trip as replay prices it (src/replay/sight.ts): the request read again from
 * cache, plus a page of the artifact (at most 8,000 chars) and the call written.
 */
export function expectedRecovery(
  p: PricingProfile,
  requestChars: number,
  itemChars: number,
  idle: number,
  past?: PastRecord,
): number {
  const trip = p.cacheRead * requestChars + p.cacheWrite * (Math.min(8000, itemChars) + 200);
  return trip * returnChance(idle, past);
}

/** outputTarget's memoized answer without a promise: the target, null (cannot be rendered), undefined (not known yet). */
function knownTarget(state: SessionState, slot: Slot, key: string, kind: RewriteKind): Target | null | undefined {
  const known = state.derived.get(targetKey(kind, key))?.value as Stored | null | undefined;
  return known === undefined || known === null ? known : { ...known, slot };
}

/** The rendering of an old output (memoized per key): its digest, or its bare receipt. */
async function outputTarget(
  state: SessionState,
  slot: Slot,
  key: string,
  kind: RewriteKind,
  o: HistoryOptions,
): Promise<Target | undefined> {
  const known = knownTarget(state, slot, key, kind);
  if (known !== undefined) return known ?? undefined;
  const memoKey = targetKey(kind, key);
  let target: Target | undefined;
  const shownText = slotText(slot.value);
  const raw = typeof slot.value === 'string' ? slot.value : evidenceText(slot.value);
  if (shownText !== undefined && raw !== undefined && !isReceipt(raw) && codePoints(raw) <= o.maxArtifactChars) {
    const toolName = slot.toolName ?? 'tool';
    const lines = shownText.trimEnd().split('\n');
    const last = lines.at(-1)!;
    const named = referencedArtifacts(last);
    const delta = parseDelta(shownText);
    if (
      delta === undefined &&
      lines.length > 1 &&
      named.length === 1 &&
      (isReceipt(last) || last.startsWith('[Token Terminator:'))
    ) {
      // Already a reduced view ending in the receipt of the full output: the digest keeps that
      // receipt (recovery returns the full output, not the view).
      const body = lines.slice(0, -1).join('\n');
      const text =
        kind === 'receipt'
          ? last
          : renderDigest(body, last, { diagnosticChars: o.digestDiagnosticChars, view: true, args: slot.callArgs });
      target = { key, kind, slot, evidence: undefined, artifactId: named[0]!, toolName, text };
    } else {
      // A delta digests as the output it stands for: the digest must not point at an earlier output.
      // The delta line is request text: its id is read in the session's scope (outside it: unknown).
      const evidence = delta === undefined ? raw : await state.reads.read(delta.current).catch(() => undefined);
      if (evidence !== undefined) {
        const receipt = localReceipt(state.meter.digests, evidence, toolName);
        const text =
          kind === 'receipt'
            ? receipt
            : renderDigest(delta === undefined ? shownText : evidence, receipt, {
                diagnosticChars: o.digestDiagnosticChars,
                args: slot.callArgs,
              });
        target = { key, kind, slot, evidence, artifactId: artifactOf(state.meter.digests, evidence), toolName, text };
      }
    }
  }
  if (target === undefined) state.derived.set(memoKey, { value: null, chars: 1 });
  else {
    // Kept without its slot: the slot holds the request's item, which the memo must not outlive.
    const { slot: _slot, ...stored } = target;
    state.derived.set(memoKey, { value: stored, chars: stored.text.length + (stored.evidence?.length ?? 0) });
  }
  return target;
}

/** verifiedOnce's answer when it is known without asking the vault. */
function verifiedNow(state: SessionState, id: string): boolean {
  return state.derived.get(`verified:${id}`)?.value === true && !state.evidence.isGone(id);
}

/**
 * Whether an artifact a reused receipt names is (still) in the vault and in the session's scope
 * (the receipt is request text: an id outside the scope is unknown); checked once per session.
 */
async function verifiedOnce(state: SessionState, id: string): Promise<boolean> {
  if (verifiedNow(state, id)) return true;
  // A text the session's ledger hashed to this id is compared with the row, not hashed again.
  const ok = await state.reads.verify(id, state.meter.digests.known(id)).catch(() => false);
  if (ok) state.derived.set(`verified:${id}`, { value: true, chars: 1 });
  return ok;
}

function reasoningTarget(digests: Digests, part: { slot: Slot; text: string }, key: string): Target | undefined {
  const prose = proseChars(part.text);
  if (prose < REASONING_MIN_CHARS || part.text.startsWith('[Token Terminator')) return undefined;
  const receipt = localReceipt(digests, part.text, 'assistant_reasoning');
  return {
    key,
    kind: 'reasoning',
    slot: part.slot,
    evidence: part.text,
    artifactId: artifactOf(digests, part.text),
    toolName: 'assistant_reasoning',
    text: reasoningRendering(part.text, receipt, prose),
  };
}
