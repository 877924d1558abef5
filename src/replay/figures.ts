/**
 * The replay figures (issue 5), defined once here and implemented literally:
 * - sizes: canonical JSON of the `messages` array, in code points (chars) and o200k_base tokens,
 *   summed over all requests; `reduction_pct` = (raw − final) / raw × 100 from tokens;
 * - cache prefix: for consecutive requests of a session, the common prefix (chars) of the
 *   serialized messages arrays; the first request of a session counts 0; ratio = Σ prefix / Σ size;
 * - effective cost per request = (size − prefix) + cache_read_price × prefix, summed; ratio final/raw;
 * - timing: wall time of the pipeline per request (tool stream included), p50/p95 by linear
 *   interpolation between closest ranks (numpy's default), total = Σ.
 * Rounding (output only; sums are exact): percentages 2 decimals, ratios 4, costs and ms 3, RSS 1.
 */
import { codePoints } from '../measure/index.js';
import type { MessagesMeter } from '../telemetry/meter.js';
import type { RequestPoint } from './series.js';

/** Figures shared by the whole replay and by each session. */
export interface ReplayTotals {
  requests: number;
  raw_chars: number;
  final_chars: number;
  raw_tokens: number;
  final_tokens: number;
  reduction_pct: number;
  receipts: number;
  recovered_exact: number;
  recovery_failures: number;
  cache_prefix_ratio_raw: number;
  cache_prefix_ratio_final: number;
  effective_cost_raw: number;
  effective_cost_final: number;
  effective_cost_ratio: number;
  p50_ms: number;
  p95_ms: number;
  total_ms: number;
}

export interface SessionFigures extends ReplayTotals {
  id: string;
  /** One point per request, in order; only with the `series` option (`replay --series`). */
  per_request?: RequestPoint[];
}

/** Exactly the keys of issue 5 at the top level, plus `sessions`. */
export interface ReplayFigures extends ReplayTotals {
  peak_rss_mb: number;
  sessions: SessionFigures[];
}

/** One request as the accumulator sees it. */
export interface RequestSample {
  readonly rawChars: number;
  readonly finalChars: number;
  readonly rawTokens: number;
  readonly finalTokens: number;
  readonly rawPrefix: number;
  readonly finalPrefix: number;
  readonly receipts: number;
  readonly recovered: number;
  readonly ms: number;
}

/** Sums requests; `figures()` applies the definitions above. */
export class FigureAccumulator {
  readonly #price: number;
  #n = 0;
  #rawChars = 0;
  #finalChars = 0;
  #rawTokens = 0;
  #finalTokens = 0;
  #rawPrefix = 0;
  #finalPrefix = 0;
  #rawCost = 0;
  #finalCost = 0;
  #receipts = 0;
  #recovered = 0;
  #extraMs = 0;
  readonly #ms: number[] = [];

  constructor(cacheReadPrice: number) {
    this.#price = cacheReadPrice;
  }

  add(r: RequestSample): void {
    this.#n++;
    this.#rawChars += r.rawChars;
    this.#finalChars += r.finalChars;
    this.#rawTokens += r.rawTokens;
    this.#finalTokens += r.finalTokens;
    this.#rawPrefix += r.rawPrefix;
    this.#finalPrefix += r.finalPrefix;
    this.#rawCost += r.rawChars - r.rawPrefix + this.#price * r.rawPrefix;
    this.#finalCost += r.finalChars - r.finalPrefix + this.#price * r.finalPrefix;
    this.#receipts += r.receipts;
    this.#recovered += r.recovered;
    this.#ms.push(r.ms);
  }

  /** Pipeline time not attributable to a request (tool results after the last request). */
  addTime(ms: number): void {
    this.#extraMs += ms;
  }

  figures(): ReplayTotals {
    const sorted = [...this.#ms].sort((a, b) => a - b);
    const total = this.#ms.reduce((a, b) => a + b, 0) + this.#extraMs;
    return {
      requests: this.#n,
      raw_chars: this.#rawChars,
      final_chars: this.#finalChars,
      raw_tokens: this.#rawTokens,
      final_tokens: this.#finalTokens,
      reduction_pct: this.#rawTokens === 0 ? 0 : round(((this.#rawTokens - this.#finalTokens) / this.#rawTokens) * 100, 2),
      receipts: this.#receipts,
      recovered_exact: this.#recovered,
      recovery_failures: this.#receipts - this.#recovered,
      cache_prefix_ratio_raw: ratio(this.#rawPrefix, this.#rawChars),
      cache_prefix_ratio_final: ratio(this.#finalPrefix, this.#finalChars),
      effective_cost_raw: round(this.#rawCost, 3),
      effective_cost_final: round(this.#finalCost, 3),
      effective_cost_ratio: ratio(this.#finalCost, this.#rawCost),
      p50_ms: round(percentile(sorted, 50), 3),
      p95_ms: round(percentile(sorted, 95), 3),
      total_ms: round(total, 3),
    };
  }
}

/** Linear interpolation between closest ranks of an ascending array (numpy default); 0 when empty. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  const rank = ((sorted.length - 1) * p) / 100;
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  const a = sorted[lo]!;
  const b = sorted[hi]!;
  return a + (b - a) * (rank - lo);
}

export function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

function ratio(part: number, whole: number): number {
  return whole <= 0 ? 0 : round(part / whole, 4);
}

/**
 * Common prefix, in code points, of canonicalJson(prev) and canonicalJson(cur) for two messages
 * arrays, from the meter's per-message JSON (no whole-array serialization): whole messages that
 * serialize identically are skipped by size, the first differing pair is compared char by char.
 * `prev` undefined (first request of a session) → 0.
 */
export function commonPrefixChars(prev: readonly unknown[] | undefined, cur: readonly unknown[], meter: MessagesMeter): number {
  if (prev === undefined) return 0;
  const n = Math.min(prev.length, cur.length);
  let p = 1; // '['
  for (let j = 0; j < n; j++) {
    const a = meter.entry(prev[j]);
    const b = prev[j] === cur[j] ? a : meter.entry(cur[j]);
    if (j > 0) p += 2; // ', '
    if (a === b || a.json === b.json) {
      p += a.chars;
      continue;
    }
    return p + commonPrefixOfStrings(a.json, b.json);
  }
  // All shared positions match: equal arrays share everything; otherwise the shorter one's ']'
  // meets the longer one's ',' (or '{' after an empty '[').
  return prev.length === cur.length ? meter.chars(cur) : p;
}

/** Common prefix of two strings in code points (never splits a surrogate pair). */
export function commonPrefixOfStrings(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  let k = 0;
  while (k < n && a.charCodeAt(k) === b.charCodeAt(k)) k++;
  if (k < n && k > 0) {
    const prev = a.charCodeAt(k - 1);
    if (prev >= 0xd800 && prev <= 0xdbff) k--;
  }
  return codePoints(a.slice(0, k));
}
