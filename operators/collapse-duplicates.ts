import { STAGES } from '../src/stages.js';
import type { OperatorFunction } from 'rxjs';
import { readRequest, writeSlots, type RequestView } from '../src/model/index.js';
import type { Slot } from '../src/model/types.js';
import type { TokenCounter } from '../src/measure/types.js';
import { stepOperator } from '../src/operator-kit.js';
import { advance, note, type ProviderRequest, type Step } from '../src/step.js';
import type { ArtifactStore, LeaseStore, SessionStore } from '../src/vault/ports.js';
import { gate, renderItems } from '../src/compile/apply.js';
import { planChanges, planDuplicates } from '../src/compile/duplicates.js';
import { observationSlots, observationTest, type ObservationSetting } from '../src/compile/observations.js';
import { parseDelta, resolveDanglingDeltas, slotText } from '../src/compile/references.js';
import { createSessionPool, intOption } from '../src/compile/session.js';
import { isRecoveryResult } from '../src/recovery/results.js';
import type { SessionState } from '../src/compile/session.js';

const STAGE = STAGES.collapseDuplicates;

/** Options of {@link collapseDuplicates}. */
export interface CollapseDuplicatesOptions {
  /** Where evidence is vaulted and leases are claimed. Required. */
  readonly vault: ArtifactStore & LeaseStore & SessionStore;
  /** Adds the token half of the acceptance gate when exact. Default: none (chars only). */
  readonly counter?: TokenCounter;
  /** Tool outputs at least this long (code points) are managed. Default 8000 (TOKEN_TERMINATOR_MIN_ARTIFACT_CHARS). */
  readonly minArtifactChars?: number;
  /** Longer outputs cannot be vaulted and stay inline. Default 2,000,000 (TOKEN_TERMINATOR_MAX_ARTIFACT_CHARS). */
  readonly maxArtifactChars?: number;
  /** Inline outputs longer than this show a bounded faithful view plus the receipt (0 = never). Default 32,000. */
  readonly maxInlineChars?: number;
  /** Size of that bounded view in code points. Default 8000. */
  readonly inlineViewChars?: number;
  /** Which user messages of a text-protocol agent are command output (see compileRequest). Default: the default pattern. */
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
export function collapseDuplicates(options: CollapseDuplicatesOptions): OperatorFunction<Step<ProviderRequest>, Step<ProviderRequest>> {
  if (options?.vault === undefined) throw new TypeError(`${STAGE}: options.vault is required`);
  const minChars = intOption(STAGE, 'minArtifactChars', options.minArtifactChars, 8000, 1);
  const maxChars = intOption(STAGE, 'maxArtifactChars', options.maxArtifactChars, 2_000_000, minChars);
  const maxInlineChars = intOption(STAGE, 'maxInlineChars', options.maxInlineChars, 32_000, 0);
  const viewChars = intOption(STAGE, 'inlineViewChars', options.inlineViewChars, 8000, 200);
  const isObservation = observationTest(STAGE, options.observations);
  const { vault, counter } = options;
  return stepOperator(STAGE, () => {
    const sessions = createSessionPool({ vault, ...(counter === undefined ? {} : { counter }) });
    // The recovery tool's results are what the model asked for: never leased, collapsed or viewed.
    const outputsOf = (view: RequestView): Slot[] => [...view.slots.filter((s) => s.kind === 'tool_output' && !isRecoveryResult(s)), ...observationSlots(view, isObservation)];
    // Synchronous until a large output or a delta is found, so pass-through Steps emit synchronously.
    return (step) => {
      const view = readRequest(step.value);
      if (view.listKey === undefined) return undefined;
      const outputs = outputsOf(view);
      const relevant = outputs.some((s) => Array.isArray(s.value) || (typeof s.value === 'string' && (s.value.length >= minChars || s.value.startsWith('[Token Terminator temporal delta'))));
      return relevant ? reduce(step, view, outputs) : undefined;
    };
    async function reduce(step: Step<ProviderRequest>, input: RequestView, inputOutputs: readonly Slot[]): Promise<Step<ProviderRequest> | undefined> {
      const sessionId = step.context.sessionId;
      const state = sessions(sessionId);
      // Fidelity first: the baseline is the request with every dangling delta resolved.
      let base = step.value;
      let view = input;
      let outputs = inputOutputs;
      const hasDelta = outputs.some((s) => parseDelta(slotText(s.value) ?? '') !== undefined);
      const { resolved, unresolved } = hasDelta ? await resolveDanglingDeltas(vault, view, outputs) : { resolved: [], unresolved: 0 };
      if (resolved.length > 0) {
        base = writeSlots(step.value, resolved.map((r) => ({ path: r.slot.path, value: r.text })));
        view = readRequest(base);
        outputs = outputsOf(view);
      }
      // Items an earlier request of this conversation had (by chain hash) are not new here.
      const chain = state.chain.hashes(input.items, (it) => state.meter.measure(it).hash);
      const seen = seenItems(state);
      const requestKey = chain.at(-1) ?? '';
      const isNew = (i: number): boolean => (seen.get(chain[i]!) ?? requestKey) === requestKey; // a retry sees its own items as new again
      const duplicates = duplicateItems(state);
      const plan = await planDuplicates(state, view, outputs, { sessionId, minChars, maxChars, maxInlineChars, viewChars, isNew, wasDuplicate: (i) => duplicates.has(chain[i]!) });
      for (const h of chain) if (!seen.has(h)) seen.set(h, requestKey);
      if (seen.size > 50_000) for (const h of [...seen.keys()].slice(0, 25_000)) seen.delete(h);
      const expanded = resolved.length > 0 ? [{ stage: STAGE, kind: 'applied' as const, reason: `${resolved.length} delta(s) against an output the request does not show replaced by the output`, artifacts: [] }] : [];
      const unresolvedNote = unresolved > 0 ? [{ stage: STAGE, kind: 'failed_open' as const, reason: `${unresolved} dangling delta(s) left: the vault could not return the output`, error: 'ArtifactUnavailable' }] : [];
      const withBase = (): Step<ProviderRequest> => {
        let out = base === step.value ? step : advance(step, base, expanded[0]!);
        for (const d of unresolvedNote) out = note(out, d);
        return out;
      };
      const items = renderItems(state, view, planChanges(plan));
      if (items === undefined) return base === step.value && unresolved === 0 ? undefined : withBase();
      const measured = gate(state, base, view, items, plan.filter((p) => p.render !== 'inline').map((p) => p.receipt));
      if (!measured.verdict.accepted) return note(withBase(), { stage: STAGE, kind: 'skipped', reason: measured.verdict.reason });
      const receipted = plan.filter((p) => p.render !== 'inline').map((p) => p.receipt.artifactId);
      await state.evidence.pin(receipted);
      // Sticky: a copy rendered as a duplicate's receipt stays one in every later request.
      for (const p of plan) if (p.duplicate && p.slot.item !== undefined) duplicates.add(chain[p.slot.item]!);
      const duplicateCount = plan.filter((p) => p.duplicate).length;
      const views = plan.filter((p) => p.render === 'view').length;
      const reason = [...(duplicateCount > 0 ? [`${duplicateCount} duplicate(s) collapsed`] : []), ...(views > 0 ? [`${views} bounded view(s)`] : [])].join(', ');
      return advance(withBase(), measured.request, {
        stage: STAGE,
        kind: 'applied',
        reason,
        savedChars: measured.savedChars,
        ...(measured.savedTokens === undefined ? {} : { savedTokens: measured.savedTokens }),
        artifacts: [...new Set(receipted)],
      });
    }
  });
}
