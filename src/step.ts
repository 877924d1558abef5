/** The element every operator receives and returns, and the helpers that build it. */

import type { PricingProfile } from './config/pricing.js';

/**
 * How long the vault calls of one host call may wait for locks, in total (ms): a held lock stalls
 * a whole call for at most one busy timeout, not one per statement. Mutable by design.
 */
export interface LockBudget {
  remainingMs: number;
  /** Lock waiting done so far on this budget (ms), added up by the vault. */
  waitedMs?: number;
}

/** Whose evidence a call touches: the tenant (profile / API-key digest) and the session. */
export interface StoreScope {
  /** Default `''`: the single local tenant. */
  readonly tenant?: string;
  /** Reads: absent = every session of the tenant. Writes: the session recorded as provenance. */
  readonly sessionId?: string;
  /** Lock-wait budget shared by the vault calls of one host call. Default: a busy timeout per vault call. */
  readonly budget?: LockBudget;
}

/** Which provider wire format a request uses. */
export type RequestFormat = 'chat' | 'responses' | 'anthropic' | 'unknown';

/** Where a request is going: used by the output cap and by tokenizer selection. */
export interface Route {
  readonly model?: string;
  readonly provider?: string;
  readonly endpoint?: string;
  /** Context window in tokens. Default: the built-in model table, else none. */
  readonly contextWindow?: number;
  /** The host's compression threshold in tokens, when it has one (the budgeting boundary W). */
  readonly compressionThreshold?: number;
  /** An explicit output cap configured for the route: no cap sent is above it, and it becomes R when smaller than the reserve. */
  readonly outputCap?: number;
  /**
   * The route's prompt-cache pricing: a built-in profile name or a complete profile. Default: the
   * configured profile (TOKEN_TERMINATOR_PRICING_PROFILE, `auto` picks by provider/model/format).
   */
  readonly pricing?: 'openai' | 'anthropic' | PricingProfile;
  /** The model's own ceiling on one response. Default: the built-in model table (src/budget/model-limits.ts), else none. */
  readonly maxOutputTokens?: number;
}

/** Who and what a Step belongs to: session, tenant, request, route and working directory, set by the host. */
export interface StepContext {
  /** Stable session id from the host. Never taken from the model. */
  readonly sessionId: string;
  /**
   * Who owns the session's evidence (reads and searches are scoped to it): a profile name or a
   * digest of the API key, never the key. Default: the single local tenant `''`.
   */
  readonly tenant?: string;
  /** Stable request id; an identical retry must reuse it. */
  readonly requestId?: string;
  readonly route?: Route;
  /**
   * The request's wire format as the host received or built it; every stage reads the request in
   * it. Default: detected from the request (src/model/read.ts `detectFormat`).
   */
  readonly format?: RequestFormat;
  /** Working directory of the host's terminal, for rewrite caching and temporal scope. */
  readonly cwd?: string;
  /**
   * How long this call's vault writes may wait for locks, in total (the facades give every call
   * one TOKEN_TERMINATOR_BUSY_TIMEOUT_MS for all its stages). Default: a busy timeout per write.
   */
  readonly lockBudget?: LockBudget;
  /**
   * Prompt tokens the host adds after the request pipeline (the recovery tool definition): the
   * window fit leaves room for them, so what goes upstream fits W − R. Default: 0.
   */
  readonly addedPromptTokens?: number;
}

/**
 * The vault scope of a Step: its tenant and session, and the call's lock budget.
 *
 * @example
 * storeScope({ sessionId: 's1', tenant: 'acme' }); // { tenant: 'acme', sessionId: 's1' }
 */
export function storeScope(context: StepContext): StoreScope {
  return {
    tenant: context.tenant ?? '',
    sessionId: context.sessionId,
    ...(context.lockBudget === undefined ? {} : { budget: context.lockBudget }),
  };
}

/** Separates the tenant from the session in a {@link sessionStateKey}; never part of a plain key. */
const STATE_KEY_MARK = '\u001f';

/**
 * The key of everything a session holds: its tenant and its id, so one tenant's session id never
 * names another tenant's session. The local tenant `''` keeps the plain session id; any other
 * tenant, or an id holding the mark, is length-prefixed behind the mark
 * (`\u001f<tenant length>\u001f<tenant><session id>`), so the encoding is injective.
 *
 * @example
 * sessionStateKey({ sessionId: 's1' }); // 's1'
 * sessionStateKey({ sessionId: 's1', tenant: 'acme' }); // '\u001f4\u001facmes1'
 */
export function sessionStateKey(context: { readonly sessionId: string; readonly tenant?: string | undefined }): string {
  const tenant = context.tenant ?? '';
  if (tenant === '' && !context.sessionId.includes(STATE_KEY_MARK)) return context.sessionId;
  return `${STATE_KEY_MARK}${tenant.length}${STATE_KEY_MARK}${tenant}${context.sessionId}`;
}

/**
 * The tenant and session id a {@link sessionStateKey} was made of (a plain id: the local tenant).
 *
 * @example
 * parseSessionStateKey(sessionStateKey({ sessionId: 's1', tenant: 'acme' })); // { tenant: 'acme', sessionId: 's1' }
 */
export function parseSessionStateKey(key: string): { readonly tenant: string; readonly sessionId: string } {
  const m = /^\u001f(\d+)\u001f/.exec(key);
  if (m === null) return { tenant: '', sessionId: key };
  const start = m[0].length;
  const length = Number(m[1]);
  return { tenant: key.slice(start, start + length), sessionId: key.slice(start + length) };
}

/** What a stage did with a Step: changed it, left it alone, fell back to the original after a failure, or only measured. */
export type DecisionKind = 'applied' | 'skipped' | 'failed_open' | 'measured';

/** A frozen record of what one stage did. Content-free: no prompt or tool text ever goes here. */
export interface Decision {
  readonly stage: string;
  readonly kind: DecisionKind;
  readonly reason: string;
  readonly savedChars?: number;
  readonly savedTokens?: number;
  readonly artifacts?: readonly string[];
  /** Error class and code only (never the message of a content-bearing error). */
  readonly error?: string;
}

/**
 * The unit every operator receives and emits: the current value, the original the host passed in, the
 * context, an optional abort signal and the decisions of the stages so far.
 */
export interface Step<T> {
  readonly value: T;
  readonly original: T;
  readonly context: StepContext;
  readonly signal?: AbortSignal;
  readonly decisions: readonly Decision[];
}

/** A terminal (or other) tool call before the host runs it. */
export interface ToolCall {
  readonly id: string;
  /** The host's tool name. */
  readonly name: string;
  readonly args: Readonly<Record<string, unknown>>;
}

/** A tool result after the host ran the tool. `content` is what the model would see. */
export interface ToolResult {
  readonly callId: string;
  readonly name: string;
  readonly args: Readonly<Record<string, unknown>>;
  readonly content: string;
  /** Process exit code when the host knows it. */
  readonly exitCode?: number;
}

/** A provider request in any of the supported wire formats (plain JSON data). */
export type ProviderRequest = Readonly<Record<string, unknown>>;

/**
 * Build the first Step for a value.
 *
 * @example
 * const step = createStep(request, { sessionId: 's1', requestId: 'r1' });
 */
export function createStep<T>(value: T, context: StepContext, signal?: AbortSignal): Step<T> {
  return signal === undefined
    ? { value, original: value, context, decisions: [] }
    : { value, original: value, context, signal, decisions: [] };
}

/**
 * A new Step with a new value and one more decision.
 *
 * @example
 * return advance(step, smaller, { stage: 'myStage', kind: 'applied' });
 */
export function advance<T>(step: Step<T>, value: T, decision: Decision): Step<T> {
  return { ...step, value, decisions: [...step.decisions, Object.freeze(decision)] };
}

/**
 * The same value with one more decision (skipped, measured).
 *
 * @example
 * import { createStep, note } from 'token-terminator';
 * const step = createStep('text', { sessionId: 's1' });
 * const noted = note(step, { stage: 'demo', kind: 'skipped', reason: 'below threshold' });
 * noted.value === step.value; // true: only the decisions grew
 */
export function note<T>(step: Step<T>, decision: Decision): Step<T> {
  return { ...step, decisions: [...step.decisions, Object.freeze(decision)] };
}

/**
 * Error label safe for logs: class name and code, never the message.
 *
 * @example
 * import { errorLabel } from 'token-terminator';
 * errorLabel(new RangeError('secret content')); // 'RangeError'
 * errorLabel(Object.assign(new Error('x'), { code: 'ENOENT' })); // 'Error:ENOENT'
 */
export function errorLabel(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return typeof code === 'string' ? `${error.name}:${code}` : error.name;
  }
  return typeof error;
}

/**
 * The fail-open rule: the incoming Step unchanged plus a `failed_open` decision.
 *
 * @example
 * catch (error) { return failOpen(step, 'myStage', error); }
 */
export function failOpen<T>(step: Step<T>, stage: string, error: unknown): Step<T> {
  return note(step, { stage, kind: 'failed_open', reason: 'internal error', error: errorLabel(error) });
}
