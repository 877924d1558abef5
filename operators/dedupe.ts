import { createHash } from 'node:crypto';
import type { OperatorFunction } from 'rxjs';
import { readRequest, type RequestView } from '../src/model/index.js';
import type { TokenCounter } from '../src/measure/types.js';
import { stepOperator } from '../src/operator-kit.js';
import { advance, note, type ProviderRequest, type Step } from '../src/step.js';
import type { ArtifactStore, LeaseStore } from '../src/vault/ports.js';
import { gate, renderItems } from '../src/compile/apply.js';
import { planChanges, planDuplicates, type PlannedSlot } from '../src/compile/duplicates.js';
import { createSessionPool, intOption, type SessionState } from '../src/compile/session.js';
import { segmentSteps } from '../src/compile/steps.js';

const STAGE = 'collapseDuplicates';

/** Options of {@link collapseDuplicates}. */
export interface CollapseDuplicatesOptions {
  /** Where evidence is vaulted and leases are claimed. Required. */
  readonly vault: ArtifactStore & LeaseStore;
  /** Adds the token half of the acceptance gate when exact. Default: none (chars only). */
  readonly counter?: TokenCounter;
  /** Tool outputs at least this long (code points) are managed. Default 8000 (TOKEN_TERMINATOR_MIN_ARTIFACT_CHARS). */
  readonly minArtifactChars?: number;
  /** Longer outputs cannot be vaulted and stay inline. Default 2,000,000 (TOKEN_TERMINATOR_MAX_ARTIFACT_CHARS). */
  readonly maxArtifactChars?: number;
  /** Inline exposures per (session, artifact). Default 1 (TOKEN_TERMINATOR_INLINE_LEASES). */
  readonly inlineLeases?: number;
  /**
   * What one exposure is. 0 (default): one request id, as in the reference — a lease expires at the
   * next request, which rewrites only the tail of the previous request. n ≥ 1: a block of n turns —
   * every request inside the block shares the exposure and expiry happens at block boundaries.
   */
  readonly leaseBlockTurns?: number;
  /** Inline exposures longer than this show a bounded view plus the receipt (0 = never). Default 32,000. */
  readonly maxInlineChars?: number;
  /** Size of that bounded view in code points. Default 8000. */
  readonly inlineViewChars?: number;
}

/**
 * Same-request duplicates and cross-request evidence leases. Within one request, identical large
 * tool outputs keep only the newest copy inline and earlier copies become receipts; across the
 * requests of a session a large output is inline for a bounded number of exposures, then a
 * receipt. Claims go through the vault (one winner across processes); when the candidate is
 * rejected, the exposures actually delivered are recorded instead.
 *
 * @example
 * requests$.pipe(collapseDuplicates({ vault, minArtifactChars: 8000 }))
 */
export function collapseDuplicates(options: CollapseDuplicatesOptions): OperatorFunction<Step<ProviderRequest>, Step<ProviderRequest>> {
  if (options?.vault === undefined) throw new TypeError(`${STAGE}: options.vault is required`);
  const minChars = intOption(STAGE, 'minArtifactChars', options.minArtifactChars, 8000, 1);
  const maxChars = intOption(STAGE, 'maxArtifactChars', options.maxArtifactChars, 2_000_000, minChars);
  const limit = intOption(STAGE, 'inlineLeases', options.inlineLeases, 1, 0, 100);
  const leaseBlock = intOption(STAGE, 'leaseBlockTurns', options.leaseBlockTurns, 0, 0);
  const maxInlineChars = intOption(STAGE, 'maxInlineChars', options.maxInlineChars, 32_000, 0);
  const viewChars = intOption(STAGE, 'inlineViewChars', options.inlineViewChars, 8000, 200);
  const { vault, counter } = options;
  return stepOperator(STAGE, () => {
    const sessions = createSessionPool({ vault, inlineLeases: limit, ...(counter === undefined ? {} : { counter }) });
    // Synchronous until a large output is found, so pass-through Steps emit synchronously.
    return (step) => {
      const view = readRequest(step.value);
      if (view.listKey === undefined) return undefined;
      const large = view.slots.some((s) => s.kind === 'tool_output' && (Array.isArray(s.value) || (typeof s.value === 'string' && s.value.length >= minChars)));
      return large ? reduce(step, view) : undefined;
    };
    async function reduce(step: Step<ProviderRequest>, view: RequestView): Promise<Step<ProviderRequest> | undefined> {
      const sessionId = step.context.sessionId;
      const state = sessions(sessionId);
      const leaseKey = leaseBlock > 0 ? `block:${Math.floor(Math.max(0, segmentSteps(view.itemInfo).starts.length - 1) / leaseBlock)}` : (step.context.requestId ?? derivedRequestId(state.meter.measure, view.items));
      const plan = await planDuplicates(state, view, { sessionId, leaseKey, minChars, maxChars, maxInlineChars, viewChars });
      if (plan.length === 0) return undefined;
      const inlineIds = plan.filter((p) => p.render !== 'receipt').map((p) => p.receipt.artifactId);
      let items = renderItems(state, view, planChanges(plan));
      let measured = items === undefined ? undefined : gate(state, step.value, view, items, plan.filter((p) => p.render !== 'inline').map((p) => p.receipt));
      if (measured !== undefined && !measured.verdict.accepted) return keepInput(step, plan, state, leaseKey, measured.verdict.reason);
      // Claim only once the candidate proved smaller (or nothing needs replacing); a lost race can
      // only turn an inline copy into a receipt, never the reverse.
      const lost = new Set<string>();
      for (const id of new Set(inlineIds)) if (!(await state.leases.claim(id, leaseKey))) lost.add(id);
      if (lost.size > 0) {
        items = renderItems(state, view, planChanges(plan, lost));
        measured = items === undefined ? undefined : gate(state, step.value, view, items, plan.map((p) => p.receipt));
        if (measured !== undefined && !measured.verdict.accepted) return keepInput(step, plan, state, leaseKey, measured.verdict.reason);
      }
      for (const p of plan) if (p.render !== 'receipt' && !lost.has(p.receipt.artifactId)) state.sticky.set(`inline:${p.receipt.artifactId}`, JSON.stringify(p.slot.path));
      if (measured === undefined) return undefined;
      const receipted = plan.filter((p) => p.render !== 'inline' || lost.has(p.receipt.artifactId)).map((p) => p.receipt.artifactId);
      await state.evidence.pin(receipted);
      const duplicates = plan.filter((p) => p.duplicate).length;
      return advance(step, measured.request, {
        stage: STAGE,
        kind: 'applied',
        reason: duplicates > 0 ? `${duplicates} duplicate(s) collapsed` : 'lease receipts',
        savedChars: measured.savedChars,
        ...(measured.savedTokens === undefined ? {} : { savedTokens: measured.savedTokens }),
        artifacts: [...new Set(receipted)],
      });
    }
  });
}

/** The input goes out after all: record every managed output in it as delivered inline. */
async function keepInput(step: Step<ProviderRequest>, plan: readonly PlannedSlot[], state: SessionState, leaseKey: string, reason: string): Promise<Step<ProviderRequest>> {
  for (const id of new Set(plan.map((p) => p.receipt.artifactId))) await state.leases.delivered(id, leaseKey);
  return note(step, { stage: STAGE, kind: 'skipped', reason });
}

/** An identical retry maps to the same id: a hash of the items' content hashes (memoized). */
function derivedRequestId(measure: (item: unknown) => { readonly hash: string }, items: readonly unknown[]): string {
  const h = createHash('sha256');
  for (const it of items) h.update(measure(it).hash);
  return `req_${h.digest('hex').slice(0, 32)}`;
}
