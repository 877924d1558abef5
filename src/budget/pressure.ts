/**
 * Preflight pressure (incontext's P + R − 1): how many tokens a request needs before the budget
 * planner has counted it provider-aware.
 */
import type { Config } from '../config/types.js';
import { canonicalJson } from '../measure/index.js';
import type { TokenCounter } from '../measure/types.js';
import type { ProviderRequest, StepContext } from '../step.js';

/**
 * Preflight pressure P + R − 1 (incontext) on the compact canonical JSON of the whole request:
 * the facade's fallback when the budget planner cannot count (its own counting is provider-aware).
 *
 * @example
 * import { createTiktokenCounter, loadConfig, preflightPressure } from 'token-terminator';
 * const pressure = preflightPressure(loadConfig(), createTiktokenCounter(), request, { sessionId: 's1' });
 */
export function preflightPressure(
  config: Config,
  counter: TokenCounter,
  request: ProviderRequest,
  context: StepContext,
): number {
  const p = counter.count(canonicalJson(request, { compact: true }));
  const reserve = config.incontext.minOutputTokens;
  const cap = context.route?.outputCap;
  const r = cap !== undefined && cap > 0 && cap < reserve ? cap : reserve;
  return p + r - 1;
}
