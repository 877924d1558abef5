/**
 * The facade's fallback pressure: the one `preflightPressure` (P + R − 1, budget/arithmetic.ts) on a
 * rough prompt count, for when the budget planner cannot count provider-aware.
 */
import type { Config } from '../config/types.js';
import { canonicalJson } from '../measure/index.js';
import type { TokenCounter } from '../measure/types.js';
import type { ProviderRequest, StepContext } from '../step.js';
import { effectiveReserve, preflightPressure } from './arithmetic.js';

/**
 * Preflight pressure P + R − 1 with P the count of the compact canonical JSON of the whole request and
 * R the configured reserve, replaced by a smaller positive route cap.
 *
 * @example
 * const pressure = fallbackPressure(loadConfig(), createTiktokenCounter(), request, { sessionId: 's1' });
 */
export function fallbackPressure(
  config: Config,
  counter: TokenCounter,
  request: ProviderRequest,
  context: StepContext,
): number {
  const prompt = counter.count(canonicalJson(request, { compact: true }));
  return preflightPressure(prompt, effectiveReserve(config.incontext.minOutputTokens, context.route?.outputCap));
}
