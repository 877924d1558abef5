/**
 * Counting a whole provider request for the output budget. `TokenCounter.count` is synchronous
 * text counting; budget backends may be remote (vLLM /tokenize), so they implement the async
 * `BudgetCounter`, and any TokenCounter adapts to it.
 */
import type { ItemMeasures } from '../ledger/item-measures.js';
import type { Recognitions } from '../model/prefix.js';
import { TokenTerminatorError } from '../errors.js';
import { createCountMemo } from '../ledger/count-memo.js';
import { canonicalJson, roughTokens, serializedChars } from '../measure/index.js';
import type { TokenCounter } from '../measure/types.js';
import type { ProviderRequest } from '../step.js';
import { CAP_FIELDS } from './request-caps.js';
import { WeakMemo } from '../weak-memo.js';

/** What a counting call knows about the route. */
export interface CountContext {
  /** The configured context length (vLLM's max_model_len must equal it). */
  readonly contextLength?: number | undefined;
}

/** An async, cancellable prompt counter for the output budget. */
export interface BudgetCounter {
  /** Non-sensitive label for decisions and metrics (`vllm`, `tiktoken:o200k_base` …). */
  readonly name: string;
  /** False when the count is an estimate: the budget then adds the fallback margin F. */
  readonly exact: boolean;
  /** Prompt tokens of the provider-visible request. Rejects with BudgetCounterError when it cannot count. */
  countRequest(request: ProviderRequest, signal: AbortSignal, context?: CountContext): Promise<number>;
  /** Drop cached counts (e.g. after the server's tokenizer changed). */
  clearCache?(): void;
  /** Release held resources (HTTP agents). */
  close?(): Promise<void>;
}

/** Why exact counting failed; the error's `code` is `E_COUNTER_<KIND>`. Messages carry no content or URLs. */
export type CounterFailure =
  | 'http_status'
  | 'timeout'
  | 'connection'
  | 'bad_body'
  | 'context_mismatch'
  | 'unsupported'
  | 'no_context_length'
  | 'internal';

/** A budget counter failed; `kind` says how (HTTP status, timeout, bad body …) and the code is `E_COUNTER_<KIND>`. */
export class BudgetCounterError extends TokenTerminatorError {
  readonly kind: CounterFailure;
  constructor(kind: CounterFailure, message: string, options?: ErrorOptions) {
    super(`E_COUNTER_${kind.toUpperCase()}`, message, options);
    this.kind = kind;
  }
}

// Fields that are not prompt content: never counted.
const SKIP = new Set<string>(CAP_FIELDS);

/**
 * Visit the parts of a request counted as prompt: each top-level key name (`onKey`) and value
 * (`onPart`), with arrays (messages, input, tools) split into elements so a memo can count each
 * element once across requests, and `extra_body` flattened. Cap fields are skipped. The count is
 * conservative: every other field counts as its compact canonical JSON (a few tokens of framing
 * more than a chat template adds).
 */
function forEachKeyAndPart(
  request: ProviderRequest,
  onKey: (key: string) => void,
  onPart: (part: unknown) => void,
): void {
  for (const key of Object.keys(request)) {
    if (SKIP.has(key)) continue;
    const value = request[key];
    if (value === undefined) continue;
    if (key === 'extra_body' && value !== null && typeof value === 'object' && !Array.isArray(value)) {
      forEachKeyAndPart(value as ProviderRequest, onKey, onPart);
      continue;
    }
    onKey(key);
    if (Array.isArray(value)) for (const item of value) onPart(item);
    else onPart(value);
  }
}

/**
 * The prompt parts of a request: key names as they are, values as compact canonical JSON.
 *
 * @example
 * promptParts({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] });
 * // ['model', '"gpt-4o"', 'messages', '{"content":"hi","role":"user"}']
 */
export function promptParts(request: ProviderRequest): string[] {
  const parts: string[] = [];
  forEachKeyAndPart(
    request,
    (key) => parts.push(key),
    (part) => parts.push(canonicalJson(part, { compact: true })),
  );
  return parts;
}

/** Options of the adapter that makes a {@link TokenCounter} a budget counter; every field is optional. */
export interface TokenCounterAdapterOptions {
  /** Remembered element counts (LRU, keyed by content). @defaultValue 4096 */
  readonly memoEntries?: number;
  /**
   * Also remember counts per element object (WeakMap). Only for hosts whose message objects are
   * never mutated after they were first sent: it skips re-serializing unchanged history.
   * @defaultValue false
   */
  readonly identityCache?: boolean;
  /**
   * The per-item measurement memo shared with the request stages and telemetry (the runtime's):
   * element counts are read from it (and written to it) when it counts with the same counter.
   * Implies the identity assumption of `identityCache`. @defaultValue none: the adapter's own memos
   */
  readonly measures?: ItemMeasures;
  /**
   * The equalities the request stages recognised (the runtime's): with `identityCache`, a rebuilt
   * copy they recognised counts as the earlier object. @defaultValue none: objects are known by identity only
   */
  readonly recognitions?: Recognitions;
}

/**
 * Adapt a synchronous TokenCounter: P = Σ tokens of the prompt parts, each part counted once
 * (memo keyed by content). Exactness follows the counter.
 *
 * @example
 * import { createTiktokenCounter } from 'token-terminator';
 * const counter = budgetCounterFrom(createTiktokenCounter());
 * const measured = await counter.countRequest(request, AbortSignal.timeout(5000));
 */
export function budgetCounterFrom(counter: TokenCounter, options: TokenCounterAdapterOptions = {}): BudgetCounter {
  const memo = createCountMemo(counter, { maxEntries: options.memoEntries ?? 4096 });
  let byObject = new WeakMemo<object, number>();
  const identity = options.identityCache === true;
  const measures = options.measures?.counter === counter ? options.measures : undefined;
  const countPart = (part: unknown): number => {
    // The element's compact JSON is the string the request stages count too: one count for both.
    if (measures !== undefined && part !== null && typeof part === 'object') return measures.compactTokens(part)!;
    if (!identity || part === null || typeof part !== 'object')
      return memo.count(canonicalJson(part, { compact: true }));
    // A rebuilt copy the request stages recognised as an earlier object counts as that object.
    const key = options.recognitions?.canonicalOf(part) ?? part;
    const known = byObject.get(key);
    if (known !== undefined) return known;
    const n = memo.count(canonicalJson(part, { compact: true }));
    byObject.set(key, n);
    return n;
  };
  return {
    name: counter.name,
    exact: counter.exact,
    countRequest(request: ProviderRequest, signal: AbortSignal): Promise<number> {
      if (signal.aborted) return Promise.reject(signal.reason);
      let total = 0;
      forEachKeyAndPart(
        request,
        (key) => (total += memo.count(key)),
        (part) => (total += countPart(part)),
      );
      return Promise.resolve(total);
    },
    clearCache: () => {
      memo.clear();
      byObject = new WeakMemo();
      measures?.clear();
    },
  };
}

/**
 * The fallback estimate: ceil(chars / 4) over the request without its cap fields, like Hermes'
 * rough estimator (`floor((chars + 3) / 4)`). The caller adds F.
 *
 * @example
 * const estimate = roughRequestTokens(request); // about chars / 4, cap fields left out
 */
export function roughRequestTokens(request: ProviderRequest): number {
  let tokens = 0;
  forEachKeyAndPart(
    request,
    (key) => (tokens += roughTokens(key)),
    (part) => (tokens += Math.ceil(serializedChars(part, { compact: true }) / 4)),
  );
  return tokens;
}

/**
 * True when `v` looks like a BudgetCounter rather than a TokenCounter.
 *
 * @example
 * import { createTiktokenCounter } from 'token-terminator';
 * isBudgetCounter(createTiktokenCounter()); // false: a TokenCounter counts text, not requests
 */
export function isBudgetCounter(v: TokenCounter | BudgetCounter): v is BudgetCounter {
  return typeof (v as Partial<BudgetCounter>).countRequest === 'function';
}
