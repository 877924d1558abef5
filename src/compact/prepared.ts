/**
 * One pass per tool result: what the tool-result stages (deltaRepeatedOutput, then
 * compressToolResult) share about one result, so its exact text is vaulted once and its compact
 * view rendered once.
 *
 * The first stage that vaults a result hands its preparation on in the decision it returns
 * (a skipped delta, field `prepared`); a later stage reads it back from the Step's decisions. It
 * belongs to that pass only: a new Step for the same result (a retry, a replay) carries other decisions and
 * prepares afresh, and a stage used alone simply finds nothing and prepares for itself.
 */
import type { Decision, Step, ToolResult } from '../step.js';
import type { ArtifactStore } from '../vault/ports.js';
import type { PutResult } from '../vault/types.js';

/** How every Token Terminator rendering of a tool result (receipt, delta, bounded view) begins. */
const RENDERING_MARK = '[Token Terminator';

/**
 * True when `content` already is a Token Terminator rendering (a temporal delta, a receipt, a
 * bounded view): no tool-result stage reduces it again. This is the one coupling between the
 * delta and the compression stage: an applied delta starts with it, so compression leaves it.
 */
export function isRendering(content: string): boolean {
  return content.startsWith(RENDERING_MARK);
}

/** One tool result as a pass has prepared it. */
export interface Prepared {
  /** The value it was made for: a stage that changed the value makes the preparation stale. */
  readonly result: ToolResult;
  readonly vault: ArtifactStore;
  readonly tenant: string;
  readonly sessionId: string;
  /** The vaulted, read-back exact text of `result.content`. */
  readonly put: PutResult;
  /**
   * Renderings of `result` made so far, by the options object of the stage they were made for
   * (one entry per stage configuration).
   */
  readonly views: Map<object, unknown>;
}

/**
 * A decision that hands a preparation on to the later stages of its pass. `prepared` is not
 * enumerable: logs, telemetry and the JSON of the decision stay content-free and unchanged.
 */
export interface HandingDecision extends Decision {
  readonly prepared?: Prepared;
}

/** A frozen copy of `decision` carrying `prepared` on to the later stages of the pass. */
export function handOn(decision: Decision, prepared: Prepared): HandingDecision {
  return Object.freeze(Object.defineProperty({ ...decision }, 'prepared', { value: prepared, enumerable: false }));
}

/**
 * The preparation an earlier stage of this pass handed on for `step`'s value in `vault` and the
 * step's tenant and session, or undefined.
 */
export function preparedFor(step: Step<ToolResult>, vault: ArtifactStore): Prepared | undefined {
  for (let i = step.decisions.length - 1; i >= 0; i -= 1) {
    const { prepared } = step.decisions[i] as HandingDecision;
    if (prepared === undefined) continue;
    const fits =
      prepared.result === step.value &&
      prepared.vault === vault &&
      prepared.tenant === (step.context.tenant ?? '') &&
      prepared.sessionId === step.context.sessionId;
    return fits ? prepared : undefined;
  }
  return undefined;
}

/** A new preparation of `step`'s value after its exact text was vaulted as `put`. */
export function prepared(step: Step<ToolResult>, vault: ArtifactStore, put: PutResult): Prepared {
  return {
    result: step.value,
    vault,
    tenant: step.context.tenant ?? '',
    sessionId: step.context.sessionId,
    put,
    views: new Map(),
  };
}
