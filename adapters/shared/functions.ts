/**
 * The framework-free function API every adapter is built on: send one tool result or one provider
 * request through the user's Terminator and get plain data back.
 *
 * Both functions are fail-open end to end: whatever goes wrong inside the pipeline (a closed vault,
 * a throwing counter, a bug in a translator), the caller gets its original value back, never an
 * exception. Only the host's own AbortSignal decides whether the run stops.
 */
import type { ReduceRequestOptions, Terminator } from '../../src/runtime/types.js';
import {
  errorLabel,
  type Decision,
  type ProviderRequest,
  type Step,
  type StepContext,
  type ToolResult,
} from '../../src/step.js';
import {
  CAP_FIELDS,
  extraBody,
  readCallerCap,
  withOutputCap as withCap,
  type CapField,
} from '../../src/budget/request-caps.js';

/** What the model should see for one tool result. */
export interface ReducedToolResult {
  /** The content to hand to the model (the original when nothing was accepted). */
  readonly content: string;
  /** True when `content` differs from the original. */
  readonly changed: boolean;
  /** Content-free decisions of the pipeline (plus an `adapter` failed_open entry when the call failed). */
  readonly decisions: readonly Decision[];
}

/** A provider request after the request pipeline. */
export interface PreparedRequest<R extends ProviderRequest = ProviderRequest> {
  /** The request to dispatch (the caller's object itself when nothing changed). */
  readonly request: R;
  readonly changed: boolean;
  readonly decisions: readonly Decision[];
  /** The pipeline's Step (absent when the call failed), for a host that records the request itself. */
  readonly step?: Step<ProviderRequest>;
}

/** The output-cap fields the three wire formats use. */
export const OUTPUT_CAP_FIELDS = CAP_FIELDS;
/** The name of an output-cap field: `max_completion_tokens`, `max_output_tokens` or `max_tokens`. */
export type OutputCapField = CapField;

function adapterFailure(stage: string, error: unknown): Decision {
  return Object.freeze({ stage, kind: 'failed_open', reason: 'adapter error', error: errorLabel(error) });
}

/**
 * Send one tool result through the tool stream (temporal delta → compress).
 *
 * @example
 * const { content } = await reduceToolResult(terminator, { callId: 'c1', name: 'terminal', args: { command: 'git log' }, content: raw }, { sessionId });
 */
export async function reduceToolResult(
  terminator: Terminator,
  result: ToolResult,
  context: StepContext,
  signal?: AbortSignal,
): Promise<ReducedToolResult> {
  try {
    const step = await terminator.reduceToolResult(result, context, signal);
    const content = step.value.content;
    if (typeof content !== 'string') return { content: result.content, changed: false, decisions: step.decisions };
    return { content, changed: content !== result.content, decisions: step.decisions };
  } catch (error) {
    return { content: result.content, changed: false, decisions: [adapterFailure('adapter.reduceToolResult', error)] };
  }
}

/**
 * Send one provider request (Chat Completions, Responses or Anthropic Messages shape) through the
 * request stream (dedupe → skill gate → compile → budget cap).
 *
 * @example
 * const { request } = await prepareRequest(terminator, body, { sessionId, route: { model: body.model, contextWindow: 128_000 } });
 */
export async function prepareRequest<R extends ProviderRequest>(
  terminator: Terminator,
  request: R,
  context: StepContext,
  signal?: AbortSignal,
  options?: ReduceRequestOptions,
): Promise<PreparedRequest<R>> {
  try {
    const step = await terminator.reduceRequest(request, context, signal, options);
    const value = step.value;
    if (value === null || typeof value !== 'object')
      return { request, changed: false, decisions: step.decisions, step };
    return { request: value as R, changed: value !== request, decisions: step.decisions, step };
  } catch (error) {
    return { request, changed: false, decisions: [adapterFailure('adapter.prepareRequest', error)] };
  }
}

/**
 * The smallest positive output cap a request carries in any of the three fields, top level or in
 * `extra_body` (undefined when none). The same reading the budget stage uses (src/budget/request-caps.ts).
 *
 * @example
 * readOutputCap({ model: 'gpt-5', max_tokens: 900, extra_body: { max_completion_tokens: 500 } }); // 500
 */
export function readOutputCap(request: ProviderRequest): number | undefined {
  return readCallerCap(request);
}

/**
 * The cap field a request already uses (top level, then `extra_body`), else the format's default.
 *
 * @example
 * outputCapField({ model: 'gpt-5', max_tokens: 900 }, 'max_completion_tokens'); // 'max_tokens'
 */
export function outputCapField(request: ProviderRequest, fallback: OutputCapField): OutputCapField {
  const extra = extraBody(request);
  return (
    OUTPUT_CAP_FIELDS.find((field) => typeof request[field] === 'number') ??
    OUTPUT_CAP_FIELDS.find((field) => typeof extra?.[field] === 'number') ??
    fallback
  );
}

/**
 * A shallow copy with exactly one cap field set at the top level (every alias removed, `extra_body`
 * ones included); the input is not touched.
 *
 * @example
 * const capped = withOutputCap(request, outputCapField(request, 'max_completion_tokens'), 4096);
 */
export function withOutputCap<R extends ProviderRequest>(request: R, field: OutputCapField, cap: number): R {
  return withCap(request, field, cap) as R;
}
