import { STAGES } from '../src/stages.js';
import type { OperatorFunction } from 'rxjs';
import { readRequest, writeSlots, type RequestView } from '../src/model/index.js';
import type { Slot } from '../src/model/types.js';
import type { TokenCounter } from '../src/measure/types.js';
import { stepOperator } from '../src/operator-kit.js';
import { advance, note, storeScope, type Decision, type ProviderRequest, type Step } from '../src/step.js';
import type { ArtifactStore, LeaseStore, SessionStore } from '../src/vault/ports.js';
import { requestStore } from '../src/vault/scoped-reads.js';
import { gate, renderItems } from '../src/compile/apply.js';
import { planChanges, planDuplicates } from '../src/compile/duplicates.js';
import {
  hostToolOutputs,
  observationSlots,
  observationTest,
  type ObservationSetting,
} from '../src/compile/observations.js';
import { mayBeDelta, parseDelta, resolveDanglingDeltas, slotText } from '../src/compile/references.js';
import type { ItemMeasures } from '../src/compile/item-measures.js';
import { createSessionPool } from '../src/compile/session.js';
import { intOption, requireVault } from '../src/options.js';
import { defaultInt } from '../src/config/index.js';
import type { SessionState } from '../src/compile/session.js';
import type { Recognised } from '../src/compile/prefix.js';

const STAGE = STAGES.collapseDuplicates;
/** Chain hashes remembered per session (the oldest half is dropped past this). */
const SEEN_MAX = 10_000;

/** Options of {@link collapseDuplicates}. */
export interface CollapseDuplicatesOptions {
  /** Where evidence is vaulted and leases are claimed. Required. */
  readonly vault: ArtifactStore & LeaseStore & SessionStore;
  /**
   * Adds the token half of the acceptance gate when exact.
   *
   * @defaultValue none (only the character count is compared)
   */
  readonly counter?: TokenCounter;
  /**
   * The per-item measurement memo to share with the other request stages, the output-budget
   * counter and telemetry (see `createItemMeasures`); read only when it counts with `counter`.
   *
   * @defaultValue none: one of the operator's own per session
   */
  readonly measures?: ItemMeasures;
  /**
   * Tool outputs at least this long (code points) are managed (≥ 1).
   *
   * @defaultValue `4000` (config `minArtifactChars`, TOKEN_TERMINATOR_MIN_ARTIFACT_CHARS)
   */
  readonly minArtifactChars?: number;
  /**
   * Longer outputs cannot be vaulted and stay inline (≥ `minArtifactChars`).
   *
   * @defaultValue `2_000_000` (config `maxArtifactChars`, TOKEN_TERMINATOR_MAX_ARTIFACT_CHARS)
   */
  readonly maxArtifactChars?: number;
  /**
   * Inline outputs longer than this show a bounded faithful view plus the receipt (0 = never).
   *
   * @defaultValue `32_000` (config `maxInlineChars`)
   */
  readonly maxInlineChars?: number;
  /**
   * Size of that bounded view in code points (≥ 200).
   *
   * @defaultValue `8000`
   */
  readonly inlineViewChars?: number;
  /**
   * Which user messages of a text-protocol agent are command output (as in compileRequest).
   *
   * @defaultValue the default observation pattern
   */
  readonly observations?: ObservationSetting;
}

/** Chain hash of every item the session's requests had → the request (its last chain hash) that first had it. */
function seenItems(state: SessionState): Map<string, string> {
  let seen = state.sticky.get('dedupe:seen') as Map<string, string> | undefined;
  if (seen === undefined) state.sticky.set('dedupe:seen', (seen = new Map()));
  return seen;
}

/** Chain hashes of the items the session's requests rendered as a duplicate's receipt. */
function duplicateItems(state: SessionState): Set<string> {
  let set = state.sticky.get('dedupe:duplicates') as Set<string> | undefined;
  if (set === undefined) state.sticky.set('dedupe:duplicates', (set = new Set()));
  return set;
}

const LAST_REQUEST = 'tt:dedupe:last';
const DUPLICATES = 'tt:dedupe:duplicates';

/**
 * A new state for a session (its lane was evicted, or another process served it before) starts
 * from the vault's mirror: the items the last request through this stage shared with earlier ones
 * are not new, and copies rendered as a duplicate's receipt stay receipts, so the session renders
 * as it would have without the eviction. A mirror that cannot be read leaves the state empty.
 */
async function restoreSession(
  state: SessionState,
  sessionId: string,
  chain: readonly string[],
  requestKey: string,
): Promise<void> {
  state.sticky.set('dedupe:restored', true);
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
 * The first request stage: what the model sees of outputs as they arrive. A temporal delta whose
 * base output is not shown in the request becomes the output it stands for (nothing refers to
 * what the request does not show); an output too large to show whole becomes a bounded faithful
 * view (head, failure lines, tail) plus its receipt; an output that arrived twice with this
 * request is shown once, inline, at its newest copy. Older outputs are left to compileRequest.
 *
 * @example
 * requests$.pipe(collapseDuplicates({ vault, minArtifactChars: 4000 }))
 */
export function collapseDuplicates(
  options: CollapseDuplicatesOptions,
): OperatorFunction<Step<ProviderRequest>, Step<ProviderRequest>> {
  requireVault(STAGE, options);
  const minChars = intOption(STAGE, 'minArtifactChars', options.minArtifactChars, defaultInt('minArtifactChars'), 1);
  const maxChars = intOption(
    STAGE,
    'maxArtifactChars',
    options.maxArtifactChars,
    defaultInt('maxArtifactChars'),
    minChars,
  );
  const maxInlineChars = intOption(STAGE, 'maxInlineChars', options.maxInlineChars, defaultInt('maxInlineChars'), 0);
  const viewChars = intOption(STAGE, 'inlineViewChars', options.inlineViewChars, 8000, 200);
  const isObservation = observationTest(STAGE, options.observations);
  const { counter, measures } = options;
  // Reads by id only through a session's scoped reads (`state.reads`): this stage's store has none.
  const vault = requestStore(options.vault);
  return stepOperator(STAGE, () => {
    const sessions = createSessionPool({
      vault: options.vault,
      ...(counter === undefined ? {} : { counter }),
      ...(measures === undefined ? {} : { measures }),
    });
    // The recovery tool's results are what the model asked for: never leased, collapsed or viewed.
    const outputsOf = (view: RequestView): Slot[] => [
      ...hostToolOutputs(view),
      ...observationSlots(view, isObservation),
    ];
    // Synchronous until a large output or a delta is found, so pass-through Steps emit synchronously.
    return (step) => {
      // The history the session's previous request had is recognised, not re-read (src/compile/prefix.ts).
      const state = sessions(step.context);
      const seen = state.requests.recognise(step.value);
      const view = seen.view;
      if (view.listKey === undefined) return undefined;
      const outputs = outputsOf(view);
      const relevant = outputs.some(
        (s) =>
          Array.isArray(s.value) ||
          (typeof s.value === 'string' &&
            (s.value.length >= minChars || s.value.startsWith('[Token Terminator temporal delta'))),
      );
      return relevant ? reduce(step, state, seen, outputs) : undefined;
    };
    async function reduce(
      step: Step<ProviderRequest>,
      state: SessionState,
      recognised: Recognised,
      inputOutputs: readonly Slot[],
    ): Promise<Step<ProviderRequest> | undefined> {
      const sessionId = step.context.sessionId;
      const input = recognised.view;
      const scope = storeScope(step.context);
      state.evidence.begin(scope);
      // Fidelity first: the baseline is the request with every dangling delta resolved.
      let base: ProviderRequest = recognised.request;
      let view = input;
      let outputs = inputOutputs;
      const hasDelta = outputs.some((s) => mayBeDelta(s.value) && parseDelta(slotText(s.value) ?? '') !== undefined);
      const { resolved, unresolved } = hasDelta
        ? await resolveDanglingDeltas(state.reads, view, outputs)
        : { resolved: [], unresolved: 0 };
      if (resolved.length > 0) {
        base = writeSlots(
          base,
          resolved.map((r) => ({ path: r.slot.path, value: r.text })),
        );
        view = readRequest(base);
        outputs = outputsOf(view);
      }
      // Items an earlier request of this conversation had (by chain hash) are not new here.
      const chain = state.chain.hashes(input.items, (it) => state.meter.measure(it).hash);
      const seen = seenItems(state);
      const requestKey = chain.at(-1) ?? '';
      const duplicates = duplicateItems(state);
      if (state.sticky.get('dedupe:restored') !== true) await restoreSession(state, sessionId, chain, requestKey);
      const isNew = (i: number): boolean => (seen.get(chain[i]!) ?? requestKey) === requestKey; // a retry sees its own items as new again
      const plan = await planDuplicates(state, view, outputs, {
        sessionId,
        minChars,
        maxChars,
        maxInlineChars,
        viewChars,
        isNew,
        wasDuplicate: (i) => duplicates.has(chain[i]!),
      });
      // The leading run of chain hashes the last request through here added is in `seen` already.
      const last = state.sticky.get('dedupe:added') as readonly string[] | undefined;
      let from = 0;
      if (last !== undefined) while (from < chain.length && from < last.length && chain[from] === last[from]) from++;
      for (let i = from; i < chain.length; i++) if (!seen.has(chain[i]!)) seen.set(chain[i]!, requestKey);
      state.sticky.set('dedupe:added', chain);
      // Bounded: a host keeping a sliding window re-keys every item per request; an evicted hash only
      // makes an old item look new, which this stage then leaves as it is unless it is a duplicate.
      if (seen.size > SEEN_MAX) {
        for (const h of [...seen.keys()].slice(0, SEEN_MAX / 2)) seen.delete(h);
        state.sticky.delete('dedupe:added');
      }
      // Mirrored for a re-created session state (eviction, another process): which leading items
      // this request shares with earlier ones. Items new here are a suffix (chain hashes are prefix hashes).
      let firstNew = chain.length;
      while (firstNew > 0 && seen.get(chain[firstNew - 1]!) === requestKey) firstNew--;
      await vault
        .setRendering(sessionId, LAST_REQUEST, `${chain.length} ${firstNew} ${requestKey}`, scope)
        .catch(() => undefined);
      const expanded =
        resolved.length > 0
          ? [
              {
                stage: STAGE,
                kind: 'applied' as const,
                reason: `${resolved.length} delta(s) against an output the request does not show replaced by the output`,
                artifacts: [],
              },
            ]
          : [];
      const unresolvedNote =
        unresolved > 0
          ? [
              {
                stage: STAGE,
                kind: 'failed_open' as const,
                reason: `${unresolved} dangling delta(s) left: the vault could not return the output`,
                error: 'ArtifactUnavailable',
              },
            ]
          : [];
      const withBase = (): Step<ProviderRequest> => {
        let out = base === recognised.request ? step : advance(step, recognised.restore(base), expanded[0]!);
        for (const d of unresolvedNote) out = note(out, d);
        return out;
      };
      // Delivery is the commit point: a receipt whose artifact is gone by then leaves its slot
      // inline (the request still has the content), and the rest is measured again.
      // Only the managed slots (receipts and views) are read from here on: the plan hands them
      // over, so the history's inline outputs are not walked again.
      let kept = plan.planned;
      let managed = plan.managed;
      let measured: ReturnType<typeof gate> | undefined;
      for (;;) {
        const items = renderItems(state, view, managed);
        if (items === undefined) return base === recognised.request && unresolved === 0 ? undefined : withBase();
        measured = gate(
          state,
          base,
          view,
          items,
          managed.map((p) => p.receipt),
        );
        if (!measured.verdict.accepted)
          return note(withBase(), { stage: STAGE, kind: 'skipped', reason: measured.verdict.reason });
        const gone = await state.evidence.deliver(
          managed.map((p) => p.receipt.artifactId),
          scope,
        );
        if (gone.length === 0) break;
        kept = kept.map((p) =>
          p.render !== 'inline' && gone.includes(p.receipt.artifactId)
            ? { slot: p.slot, receipt: p.receipt, duplicate: false, render: 'inline' as const }
            : p,
        );
        managed = planChanges(kept);
      }
      // Sticky: a copy rendered as a duplicate's receipt stays one in every later request (a
      // duplicate is never inline).
      const known = duplicates.size;
      for (const p of managed) if (p.duplicate && p.slot.item !== undefined) duplicates.add(chain[p.slot.item]!);
      if (duplicates.size > known)
        await vault.setRendering(sessionId, DUPLICATES, JSON.stringify([...duplicates]), scope).catch(() => undefined);
      // Each mechanism is credited with what it saved: collapsed duplicates here, bounded views of
      // outputs over the inline limit under their own id (nothing was duplicated for those).
      const duplicated = managed.filter((p) => p.duplicate);
      const viewed = managed.filter((p) => !p.duplicate);
      const share = creditShares(duplicated, viewed);
      const parts = [
        {
          stage: STAGE,
          slots: duplicated,
          share: share.duplicates,
          reason: `${duplicated.length} duplicate(s) collapsed`,
        },
        {
          stage: STAGES.boundedView,
          slots: viewed,
          share: 1 - share.duplicates,
          reason: `${viewed.length} bounded view(s)`,
        },
      ].filter((x) => x.slots.length > 0);
      let out = advance(
        withBase(),
        recognised.restore(measured.request),
        credit(parts[0]!, measured, parts.length === 1),
      );
      if (parts.length > 1) out = note(out, credit(parts[1]!, measured, false, parts[0]));
      return out;
    }
  });
}

type Part = {
  readonly stage: string;
  readonly slots: readonly { readonly receipt: { readonly artifactId: string } }[];
  readonly share: number;
  readonly reason: string;
};

/** The part of the chars a set of managed slots took off (each slot's original size minus what it shows). */
function creditShares(
  duplicated: readonly { readonly slot: Slot; readonly text: string }[],
  viewed: readonly { readonly slot: Slot; readonly text: string }[],
): { readonly duplicates: number } {
  const cut = (ps: readonly { readonly slot: Slot; readonly text: string }[]): number =>
    ps.reduce((n, p) => n + Math.max(0, (slotText(p.slot.value) ?? '').length - p.text.length), 0);
  const d = cut(duplicated);
  const v = cut(viewed);
  return { duplicates: d + v === 0 ? (viewed.length === 0 ? 1 : 0) : d / (d + v) };
}

/**
 * One mechanism's applied decision: its share of the measured saving (the last part takes the rest,
 * so the parts add up to the measured saving exactly).
 */
function credit(
  part: Part,
  measured: { readonly savedChars: number; readonly savedTokens?: number | undefined },
  whole: boolean,
  before?: Part,
): Decision {
  const of = (n: number): number =>
    whole ? n : before === undefined ? Math.round(n * part.share) : n - Math.round(n * before.share);
  return {
    stage: part.stage,
    kind: 'applied',
    reason: part.reason,
    savedChars: of(measured.savedChars),
    ...(measured.savedTokens === undefined ? {} : { savedTokens: of(measured.savedTokens) }),
    artifacts: [...new Set(part.slots.map((p) => p.receipt.artifactId))],
  };
}
