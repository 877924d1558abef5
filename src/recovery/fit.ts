/**
 * The window fit around the recovery tool, shared by every host that adds the tool after the request
 * pipeline (the gateway, the custom-loop wrappers): how many prompt tokens the tool adds (the fit
 * leaves room for them), the output cap lowered by them, and the refit of a recovery-round
 * continuation, so every request that goes upstream fits the window as the first one did.
 */
import { CAP_FIELDS } from '../budget/request-caps.js';
import { canonicalJson } from '../measure/index.js';
import type { TokenCounter } from '../measure/types.js';
import type { Terminator } from '../runtime/types.js';
import type { ProviderRequest, StepContext } from '../step.js';

/**
 * Tokens of the tool definitions `after` adds to `before` (compact JSON, as the budget counts parts).
 *
 * @example
 * const added = recoveryToolTokens(tt.counter, body, withRecoveryTool(body, 'chat', tt.recoveryTool));
 * // 0 when the counter throws: nothing can be sized, and the request passes as it is
 */
export function recoveryToolTokens(counter: TokenCounter, before: ProviderRequest, after: ProviderRequest): number {
  const tools = (r: ProviderRequest): unknown[] => (Array.isArray(r['tools']) ? (r['tools'] as unknown[]) : []);
  const added = tools(after).slice(tools(before).length);
  try {
    const key = tools(before).length === 0 ? counter.count('tools') : 0;
    return key + added.reduce<number>((n, t) => n + counter.count(canonicalJson(t, { compact: true })), 0);
  } catch {
    // A counter that fails cannot size anything: the request stages fail open on their own count,
    // and the host sends what it has (fail-open: never an error of ours in the agent's way).
    return 0;
  }
}

/**
 * The request with its output cap (the one field the cap stage wrote) lowered by `tokens`, never below 1.
 *
 * @example
 * capLoweredBy({ model: 'm', max_tokens: 900 }, 100); // { model: 'm', max_tokens: 800 }
 */
export function capLoweredBy(request: ProviderRequest, tokens: number): ProviderRequest {
  const field = CAP_FIELDS.find((f) => typeof request[f] === 'number');
  if (field === undefined || tokens <= 0) return request;
  return { ...request, [field]: Math.max(1, (request[field] as number) - tokens) };
}

/**
 * The `refit` hook of the recovery loop: a continuation goes through the request pipeline again
 * (not recorded: the first request was), so it fits the window as the first did. `context` is the
 * request's own, without `addedPromptTokens` (the continuation already carries the tool).
 *
 * @example
 * runRecoveryLoop({ ..., refit: refitContinuation(tt, context) });
 */
export function refitContinuation(
  terminator: Pick<Terminator, 'reduceRequest'>,
  context: StepContext,
  signal?: AbortSignal,
): (request: ProviderRequest) => Promise<ProviderRequest> {
  return async (request) => (await terminator.reduceRequest(request, context, signal, { record: false })).value;
}
