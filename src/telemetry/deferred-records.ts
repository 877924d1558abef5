/**
 * The facade's per-request telemetry (the metrics row, the ledger's turn) runs one turn of the event
 * loop after `reduceRequest` answered, in call order, on a snapshot taken when the call answered:
 * hosts append to their messages array right after a call.
 */
import type { ProviderRequest, Step } from '../step.js';

/** A request's shape copied far enough that later changes to the caller's arrays do not reach it. */
function copyRequest(request: ProviderRequest): ProviderRequest {
  const out: Record<string, unknown> = { ...request };
  for (const key of ['messages', 'input'] as const) {
    const list = out[key];
    if (Array.isArray(list)) out[key] = [...list];
  }
  return out as ProviderRequest;
}

/** A request as the deferred record reads it: its Step, and the continuation requests of its recovery rounds. */
export type RecordedStep = Step<ProviderRequest> & { readonly continuations?: readonly ProviderRequest[] };

/**
 * The Step as the deferred record reads it: the caller's request and the final one as they were
 * when the call answered (or `sent`, what the host sent in the end), the context without its lock
 * budget (that budget belonged to the call; a deferred write waits with its own).
 */
export function recordedStep(
  step: Step<ProviderRequest>,
  sent?: ProviderRequest,
  continuations?: readonly ProviderRequest[],
): RecordedStep {
  const { lockBudget: _spent, ...context } = step.context;
  const original = copyRequest(step.original);
  const value = sent ?? step.value;
  return {
    original,
    value: value === step.original ? original : copyRequest(value),
    context,
    decisions: step.decisions,
    ...(continuations === undefined || continuations.length === 0 ? {} : { continuations: [...continuations] }),
  };
}
