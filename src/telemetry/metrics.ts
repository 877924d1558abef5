/**
 * Content-free per-request metrics: what the vault's `request_metrics` and
 * `request_component_metrics` tables receive. Only numbers, stage names, component names, ids,
 * mode and model labels: never prompt or tool text (the canary test checks every table).
 */
import type { Decision } from '../step.js';
import type { RequestMetric } from '../vault/types.js';
import { COMPONENTS, type Attribution } from './attribution.js';

/**
 * Saved chars per stage, from the `applied` decisions that report them.
 *
 * @example
 * const saved = savedByStage(step.decisions); // e.g. { compressToolResult: 5400 }
 */
export function savedByStage(decisions: Iterable<Decision>, into: Record<string, number> = {}): Record<string, number> {
  for (const d of decisions) {
    if (d.kind !== 'applied' || d.savedChars === undefined || d.savedChars <= 0) continue;
    into[d.stage] = (into[d.stage] ?? 0) + d.savedChars;
  }
  return into;
}

/**
 * True when any stage failed open.
 *
 * @example
 * if (anyFailedOpen(step.decisions)) console.warn('a stage failed open; the original passed through');
 */
export function anyFailedOpen(decisions: Iterable<Decision>): boolean {
  for (const d of decisions) if (d.kind === 'failed_open') return true;
  return false;
}

/** What one request's metric row records: ids, mode, model and the request's size before and after the stages (no content). */
export interface RequestMetricInput {
  readonly sessionId: string;
  readonly requestId: string;
  readonly mode: string;
  readonly model?: string;
  readonly raw: Attribution;
  readonly final: Attribution;
  /** Tokens of the raw/final conversation arrays, when the caller measured them exactly. */
  readonly rawTokens?: number;
  readonly finalTokens?: number;
  readonly tokenizer: string;
  readonly receipts: number;
  readonly failedOpen: boolean;
  readonly savedByStage: Readonly<Record<string, number>>;
}

/**
 * Assemble the frozen RequestMetric row (components: raw/final tokens per bucket).
 *
 * @example
 * const row = requestMetric({
 *   sessionId: 's1', requestId: 'r1', mode: 'balanced', raw, final, tokenizer: 'o200k_base',
 *   receipts: 1, failedOpen: anyFailedOpen(step.decisions), savedByStage: savedByStage(step.decisions),
 * });
 */
export function requestMetric(input: RequestMetricInput): RequestMetric {
  const components: Record<string, { raw: number; final: number }> = {};
  for (const c of COMPONENTS) {
    const raw = input.raw.components[c].tokens;
    const final = input.final.components[c].tokens;
    if (raw !== 0 || final !== 0) components[c] = Object.freeze({ raw, final });
  }
  const base = {
    sessionId: input.sessionId,
    requestId: input.requestId,
    mode: input.mode,
    rawChars: input.raw.totalChars,
    finalChars: input.final.totalChars,
    rawTokens: input.rawTokens ?? input.raw.totalTokens,
    finalTokens: input.finalTokens ?? input.final.totalTokens,
    tokenizer: input.tokenizer,
    receipts: input.receipts,
    failedOpen: input.failedOpen,
    savedByStage: Object.freeze({ ...input.savedByStage }),
    components: Object.freeze(components),
  };
  return Object.freeze(input.model === undefined ? base : { ...base, model: input.model });
}
