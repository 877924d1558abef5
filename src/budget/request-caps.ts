/** Reading and writing output-cap fields of provider requests, without touching the caller's objects. */
import { detectFormat, isObj } from '../model/read.js';
import type { ProviderRequest, RequestFormat } from '../step.js';

/** The three output-cap aliases providers accept. */
export const CAP_FIELDS = ['max_tokens', 'max_completion_tokens', 'max_output_tokens'] as const;
/** One of {@link CAP_FIELDS}. */
export type CapField = (typeof CAP_FIELDS)[number];

/** Which server dialect receives the request (vLLM takes `max_tokens` on Chat Completions). */
export type CapDialect = 'openai' | 'vllm';

type Obj = Readonly<Record<string, unknown>>;

function positiveInt(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isSafeInteger(v) && v > 0 ? v : undefined;
}

/**
 * The request's `extra_body` when it is an object.
 *
 * @example
 * extraBody({ messages: [], extra_body: { top_k: 20 } }); // { top_k: 20 }
 * extraBody({ messages: [] }); // undefined
 */
export function extraBody(request: ProviderRequest): Obj | undefined {
  const extra = request['extra_body'];
  return isObj(extra) ? extra : undefined;
}

/**
 * B: the smallest positive integer among the cap fields, top level and `extra_body`.
 *
 * @example
 * readCallerCap({ model: 'gpt-5', max_completion_tokens: 2000 }); // 2000
 */
export function readCallerCap(request: ProviderRequest): number | undefined {
  const caps = [request, extraBody(request) ?? {}]
    .flatMap((source) => CAP_FIELDS.map((field) => positiveInt(source[field])))
    .filter((v) => v !== undefined);
  return caps.length === 0 ? undefined : Math.min(...caps);
}

function usedField(request: ProviderRequest, field: CapField): boolean {
  return positiveInt(request[field]) !== undefined || positiveInt(extraBody(request)?.[field]) !== undefined;
}

/**
 * The request's wire format: src/model's detector, plus the route's provider as a hint (an
 * Anthropic route's plain `messages` request is Anthropic Messages even without a `system`).
 *
 * @example
 * detectRequestFormat({ messages: [{ role: 'user', content: 'hi' }] }, 'anthropic'); // 'anthropic'
 */
export function detectRequestFormat(request: ProviderRequest, providerHint?: string): RequestFormat {
  if (providerHint?.toLowerCase() === 'anthropic' && Array.isArray(request['messages'])) return 'anthropic';
  return detectFormat(request);
}

/**
 * The one field to emit: Responses `max_output_tokens`, Anthropic `max_tokens`; Chat Completions
 * `max_completion_tokens`, or `max_tokens` when that is the field the caller used; for vLLM
 * `max_tokens` unless the caller used only `max_completion_tokens` (vLLM accepts both).
 *
 * @example
 * capFieldFor('responses', { input: [] }); // 'max_output_tokens'
 * capFieldFor('chat', { messages: [], max_tokens: 500 }); // 'max_tokens'
 */
export function capFieldFor(
  format: RequestFormat,
  request: ProviderRequest,
  dialect: CapDialect = 'openai',
): CapField | undefined {
  switch (format) {
    case 'responses':
      return 'max_output_tokens';
    case 'anthropic':
      return 'max_tokens';
    case 'chat': {
      const usedMax = usedField(request, 'max_tokens');
      const usedCompletion = usedField(request, 'max_completion_tokens');
      if (dialect === 'vllm') return usedCompletion && !usedMax ? 'max_completion_tokens' : 'max_tokens';
      return usedMax && !usedCompletion ? 'max_tokens' : 'max_completion_tokens';
    }
    default:
      return undefined;
  }
}

/**
 * A new request with every cap alias removed (top level and `extra_body`) and `field: cap` set at
 * the top level. Shallow copies only: unchanged members (messages, tools) are shared.
 *
 * @example
 * withOutputCap({ messages: [], max_tokens: 9000 }, 'max_completion_tokens', 2048);
 * // { messages: [], max_completion_tokens: 2048 }
 */
export function withOutputCap(request: ProviderRequest, field: CapField, cap: number): ProviderRequest {
  const out: Record<string, unknown> = { ...request };
  for (const f of CAP_FIELDS) delete out[f];
  const extra = extraBody(request);
  if (extra !== undefined && CAP_FIELDS.some((f) => f in extra)) {
    const copy: Record<string, unknown> = { ...extra };
    for (const f of CAP_FIELDS) delete copy[f];
    out['extra_body'] = copy;
  }
  out[field] = cap;
  return out;
}
