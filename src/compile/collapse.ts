/**
 * What collapseDuplicates (operators/collapse-duplicates.ts) keeps per session and does after its
 * plan: which items earlier requests had (mirrored in the vault for a re-created session state),
 * the delivery loop (a receipt whose artifact is gone by then goes back inline) and the credit of
 * the measured saving between collapsed duplicates and bounded views.
 */
import { STAGES } from '../stages.js';
import type { Slot } from '../model/types.js';
import type { Decision, ProviderRequest } from '../step.js';
import type { RequestView } from '../model/types.js';
import type { StoreScope } from '../vault/ports.js';
import { gate, renderItems } from './apply.js';
import { planChanges, type DuplicatesPlanned, type Managed } from './duplicates.js';
import { readRequest, writeSlots } from '../model/index.js';
import { sharedLead, type Recognised } from '../model/prefix.js';
import { firstOutput, mayBeDelta, parseDelta, resolveDanglingDeltas, slotText } from './references.js';
import type { SessionState } from './session.js';

const STAGE = STAGES.collapseDuplicates;
/** Chain hashes remembered per session (the oldest half is dropped past this). */
const SEEN_MAX = 10_000;

/** Chain hash of every item the session's requests had → the request (its last chain hash) that first had it. */
export function seenItems(state: SessionState): Map<string, string> {
  return (state.memo.seen ??= new Map());
}

/** Chain hashes of the items the session's requests rendered as a duplicate's receipt. */
export function duplicateItems(state: SessionState): Set<string> {
  return (state.memo.duplicates ??= new Set());
}

const LAST_REQUEST = 'tt:dedupe:last';
const DUPLICATES = 'tt:dedupe:duplicates';

/**
 * A new state for a session (its lane was evicted, or another process served it before) starts
 * from the vault's mirror: the items the last request through this stage shared with earlier ones
 * are not new, and copies rendered as a duplicate's receipt stay receipts, so the session renders
 * as it would have without the eviction. A mirror that cannot be read leaves the state empty.
 */
export async function restoreSession(
  state: SessionState,
  sessionId: string,
  chain: readonly string[],
  requestKey: string,
): Promise<void> {
  state.memo.restored = true;
  // One read after the other: the stage holds one vault connection at a time.
  const last = await state.vault.getRendering(sessionId, LAST_REQUEST).catch(() => undefined);
  const listed = await state.vault.getRendering(sessionId, DUPLICATES).catch(() => undefined);
  const [length, firstNew, key] = (last ?? '').split(' ');
  const n = Number(length);
  if (key !== undefined && Number.isInteger(n) && n > 0 && n <= chain.length && chain[n - 1] === key) {
    // Seen by that request (a retry of it: by the requests before it), not by this one.
    const upTo = key === requestKey ? Math.min(n, Number(firstNew) || 0) : n;
    const seen = seenItems(state);
    for (let i = 0; i < upTo; i++) if (!seen.has(chain[i]!)) seen.set(chain[i]!, key === requestKey ? '' : key);
  }
  try {
    const hashes: unknown = listed === undefined ? [] : JSON.parse(listed);
    if (Array.isArray(hashes)) for (const h of hashes) if (typeof h === 'string') duplicateItems(state).add(h);
  } catch {
    // an unreadable mirror: start without it
  }
}

/**
 * Which of the request's items are new in this conversation (a retry sees its own items as new
 * again) and which were rendered as a duplicate's receipt before, by index; a new session state
 * first reads the vault's mirror.
 */
export async function sessionHistory(
  state: SessionState,
  sessionId: string,
  chain: readonly string[],
): Promise<{ isNew(i: number): boolean; wasDuplicate(i: number): boolean }> {
  const seen = seenItems(state);
  const requestKey = chain.at(-1) ?? '';
  const duplicates = duplicateItems(state);
  if (state.memo.restored !== true) await restoreSession(state, sessionId, chain, requestKey);
  return {
    isNew: (i) => (seen.get(chain[i]!) ?? requestKey) === requestKey,
    wasDuplicate: (i) => duplicates.has(chain[i]!),
  };
}

/** A tool output that is a temporal delta (the test of {@link resolveBase}). */
const isParsedDelta = (s: Slot): boolean => mayBeDelta(s.value) && parseDelta(slotText(s.value) ?? '') !== undefined;

/** The request with every dangling delta resolved (the baseline: fidelity first), its view and outputs. */
export async function resolveBase(
  state: SessionState,
  recognised: Recognised,
  outputs: readonly Slot[],
  outputsOf: (view: RequestView, state: SessionState) => Slot[],
): Promise<{
  readonly base: ProviderRequest;
  readonly view: RequestView;
  readonly outputs: readonly Slot[];
  readonly resolved: readonly unknown[];
  readonly unresolved: number;
}> {
  const hasDelta = firstOutput(state.memo, outputs, isParsedDelta) >= 0;
  const { resolved, unresolved } = hasDelta
    ? await resolveDanglingDeltas(state, recognised.view, outputs)
    : { resolved: [], unresolved: 0 };
  if (resolved.length === 0) return { base: recognised.request, view: recognised.view, outputs, resolved, unresolved };
  const base = writeSlots(
    recognised.request,
    resolved.map((r) => ({ path: r.slot.path, value: r.text })),
  );
  const view = readRequest(base, { format: recognised.view.format });
  return { base, view, outputs: outputsOf(view, state), resolved, unresolved };
}

/**
 * Record the request's items as seen (by the request that first had them) and mirror which leading
 * items it shares with earlier ones, for a re-created session state (eviction, another process).
 */
export async function noteSeen(
  state: SessionState,
  sessionId: string,
  chain: readonly string[],
  scope: StoreScope,
): Promise<void> {
  const seen = seenItems(state);
  const requestKey = chain.at(-1) ?? '';
  // The leading run of chain hashes the last request through here added is in `seen` already.
  const last = state.memo.added;
  for (let i = last === undefined ? 0 : sharedLead(chain, last, undefined); i < chain.length; i++)
    if (!seen.has(chain[i]!)) seen.set(chain[i]!, requestKey);
  state.memo.added = chain;
  // Bounded: a host keeping a sliding window re-keys every item per request; an evicted hash only
  // makes an old item look new, which this stage then leaves as it is unless it is a duplicate.
  if (seen.size > SEEN_MAX) {
    for (const h of [...seen.keys()].slice(0, SEEN_MAX / 2)) seen.delete(h);
    delete state.memo.added;
  }
  // Items new here are a suffix (chain hashes are prefix hashes).
  let firstNew = chain.length;
  while (firstNew > 0 && seen.get(chain[firstNew - 1]!) === requestKey) firstNew--;
  await state.vault
    .setRendering(sessionId, LAST_REQUEST, `${chain.length} ${firstNew} ${requestKey}`, scope)
    .catch(() => undefined);
}

/** What delivering a plan came to: nothing to render, a gate that refused, or the managed slots and the measured request. */
export type Delivered =
  | { readonly kind: 'none' }
  | { readonly kind: 'skipped'; readonly reason: string }
  | { readonly kind: 'delivered'; readonly managed: readonly Managed[]; readonly measured: ReturnType<typeof gate> };

/**
 * Render, gate and deliver the plan's managed slots (receipts and views). Delivery is the commit
 * point: a receipt whose artifact is gone by then leaves its slot inline (the request still has
 * the content), and the rest is measured again. Only the managed slots are read from here on: the
 * plan hands them over, so the history's inline outputs are not walked again.
 */
export async function deliverPlan(
  state: SessionState,
  base: ProviderRequest,
  view: RequestView,
  plan: DuplicatesPlanned,
  scope: StoreScope,
): Promise<Delivered> {
  let kept = plan.planned;
  let managed = plan.managed;
  for (;;) {
    const items = renderItems(state, view, managed);
    if (items === undefined) return { kind: 'none' };
    const measured = gate(
      state,
      base,
      view,
      items,
      managed.map((p) => p.receipt),
    );
    if (!measured.verdict.accepted) return { kind: 'skipped', reason: measured.verdict.reason };
    const gone = await state.evidence.deliver(
      managed.map((p) => p.receipt.artifactId),
      scope,
    );
    if (gone.length === 0) return { kind: 'delivered', managed, measured };
    kept = kept.map((p) =>
      p.render !== 'inline' && gone.includes(p.receipt.artifactId)
        ? { slot: p.slot, receipt: p.receipt, duplicate: false, render: 'inline' as const }
        : p,
    );
    managed = planChanges(kept);
  }
}

/**
 * Sticky: a copy rendered as a duplicate's receipt stays one in every later request (a duplicate
 * is never inline); mirrored for a re-created session state.
 */
export async function markDuplicates(
  state: SessionState,
  sessionId: string,
  chain: readonly string[],
  managed: readonly Managed[],
  scope: StoreScope,
): Promise<void> {
  const duplicates = duplicateItems(state);
  const known = duplicates.size;
  for (const p of managed) if (p.duplicate && p.slot.item !== undefined) duplicates.add(chain[p.slot.item]!);
  if (duplicates.size > known)
    await state.vault
      .setRendering(sessionId, DUPLICATES, JSON.stringify([...duplicates]), scope)
      .catch(() => undefined);
}

/**
 * The applied decisions of a delivered plan: collapsed duplicates under this stage, bounded views
 * under their own id, each credited with its share of the chars it took off; the second part takes
 * the rest, so the parts add up to the measured saving exactly.
 */
export function creditedDecisions(
  managed: readonly Managed[],
  measured: { readonly savedChars: number; readonly savedTokens?: number | undefined },
): Decision[] {
  const duplicated = managed.filter((p) => p.duplicate);
  const viewed = managed.filter((p) => !p.duplicate);
  const cut = (ps: readonly Managed[]): number =>
    ps.reduce((n, p) => n + Math.max(0, (slotText(p.slot.value) ?? '').length - p.text.length), 0);
  const d = cut(duplicated);
  const v = cut(viewed);
  const share = d + v === 0 ? (viewed.length === 0 ? 1 : 0) : d / (d + v);
  const decision = (stage: string, slots: readonly Managed[], reason: string, of: (n: number) => number): Decision => ({
    stage,
    kind: 'applied',
    reason,
    savedChars: of(measured.savedChars),
    ...(measured.savedTokens === undefined ? {} : { savedTokens: of(measured.savedTokens) }),
    artifacts: [...new Set(slots.map((p) => p.receipt.artifactId))],
  });
  // A part alone takes the whole saving (its share is 1, the other's 0).
  const ofDup = (n: number): number => Math.round(n * share);
  const dup = decision(STAGE, duplicated, `${duplicated.length} duplicate(s) collapsed`, ofDup);
  const view = decision(STAGES.boundedView, viewed, `${viewed.length} bounded view(s)`, (n) => n - ofDup(n));
  return viewed.length === 0 ? [dup] : duplicated.length === 0 ? [view] : [dup, view];
}

/** `decision` alone when `n` (what it counts) is not 0, else no decision. */
const notesOf = (n: number, decision: Decision): Decision[] => (n > 0 ? [decision] : []);

/** The decision of a request whose dangling deltas were replaced by the outputs they stand for. */
export const deltaNotes = (resolved: readonly unknown[]): Decision[] =>
  notesOf(resolved.length, {
    stage: STAGE,
    kind: 'applied',
    reason: `${resolved.length} delta(s) against an output the request does not show replaced by the output`,
    artifacts: [],
  });

/** The note of dangling deltas the vault could not resolve. */
export const unresolvedNotes = (unresolved: number): Decision[] =>
  notesOf(unresolved, {
    stage: STAGE,
    kind: 'failed_open',
    reason: `${unresolved} dangling delta(s) left: the vault could not return the output`,
    error: 'ArtifactUnavailable',
  });
