/**
 * The replay figures, defined once here and implemented literally:
 * - sizes: canonical JSON of the `messages` array, in code points (chars) and o200k_base tokens,
 *   summed over all requests; `reduction_pct` = (raw − final) / raw × 100 from tokens;
 * - cache prefix: for consecutive requests of a session, the common prefix (chars) of the
 *   serialized messages arrays; the first request of a session counts 0; ratio = Σ prefix / Σ size;
 * - effective cost per request under a pricing profile (src/config/pricing.ts, `requestCost`):
 *   cache_read × prefix + cache_write × (size − prefix), with the prefix counted only when it
 *   reaches the profile's minimum cacheable prefix (tokens estimated from the request's own
 *   tokens-per-char) and a request below the minimum billed at 1 × throughout; summed; ratio
 *   final/raw. `effective_cost_*` use the route's profile (`pricing_profile`); the ratio under
 *   each built-in profile is reported as well (`effective_cost_ratio_openai`, `_anthropic`);
 * - prefix reuse, fidelity, sight at use and the effective cost with recoveries: docs/fidelity.md
 *   (src/replay/fidelity.ts, src/replay/sight.ts); a simulated recovery is billed as
 *   `requestCost(final size + new input, cached = final size)`; prefix reuse is measured over the
 *   concatenated serialized messages (no array brackets, so raw sessions score exactly 1);
 * - timing: wall time of the pipeline per request (tool stream included), p50/p95 by linear
 *   interpolation between closest ranks (numpy's default), total = Σ.
 * Rounding (output only; sums are exact): percentages 2 decimals, ratios 4, costs and ms 3, RSS 1.
 */
import { PRICING_PROFILES, requestCost, type PricingProfile } from '../config/pricing.js';
import { codePoints } from '../measure/index.js';
import { round } from '../telemetry/ledger.js';
import type { MessagesMeter } from '../ledger/messages-meter.js';
import { addCounts, emptyCounts, pct, type FidelityCounts } from './fidelity.js';
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
  /** Requests whose final request shows every instruction-prefix message verbatim. */
  task_visible_pct: number;
  /** Earlier assistant actions present verbatim, over requests × actions. */
  actions_visible_pct: number;
  /** Diagnostic lines of large outputs present in the first final request after them. */
  diagnostics_visible_pct: number;
  /** Strings the agent's next actions learned from an output, present in the first final request after it. */
  grounding_pct: number;
  /** Σ common prefix of final n and final n+1 / Σ size of final n (raw sessions: 1). */
  prefix_reuse: number;
  /** The route's pricing profile behind `effective_cost_*` (`per-route` when sessions differ). */
  pricing_profile: string;
  /** Effective cost ratio under the built-in OpenAI-style profile (reads 0.1, writes 1.0). */
  effective_cost_ratio_openai: number;
  /** Effective cost ratio under the built-in Anthropic-style profile (reads 0.1, writes 1.25). */
  effective_cost_ratio_anthropic: number;
  /** Lines the agent's actions copied from earlier tool outputs, present in the request that produced the action. */
  use_lines_pct: number;
  /** Words (identifiers, paths, numbers) the agent's actions copied from earlier tool outputs, present likewise. */
  use_words_pct: number;
  /** Actions with a used line their request did not show, over actions. */
  actions_missing_use_pct: number;
  /** Actions with any used item not shown: each one recovery round trip in a live loop. */
  simulated_recoveries: number;
  /** Effective cost of the finals plus the simulated recoveries' round trips, over raw (route profile). */
  effective_cost_with_recoveries_ratio: number;
  /** The same under the built-in OpenAI-style profile. */
  effective_cost_with_recoveries_ratio_openai: number;
  /** The same under the built-in Anthropic-style profile. */
  effective_cost_with_recoveries_ratio_anthropic: number;
  /** The counts behind the fidelity percentages. */
  fidelity: FidelityCounts;
  /** With a window (`replay --window N`): raw requests whose prompt + R is over W (the cap's counting). */
  requests_over_window_raw?: number;
  /** With a window: final requests whose prompt + R is over W. */
  requests_over_window_sent?: number;
  /** With a window: requests where the window fit chose new renderings (a cache-breaking rewrite). */
  window_rewrites?: number;
  /** With a window: requests the fit passed on unchanged because the prefix, the newest turn and R alone do not fit W (`window_exceeded`). */
  requests_window_unfittable?: number;
}

/** One session's replay figures: its totals, and per-request points when asked for. */
export interface SessionFigures extends ReplayTotals {
  id: string;
  /** One point per request, in order; only with the `series` option (`replay --series`). */
  per_request?: RequestPoint[];
}

/** Exactly the figure keys above at the top level, plus `sessions`. */
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
  /** Common prefix of the previous final request and this one (item serialization; 0 for the first). */
  readonly reusePrefix: number;
  /** Size of the previous final request (item serialization; 0 for the first). */
  readonly reuseBase: number;
  /** New input chars of the request's simulated recovery round trip (src/replay/sight.ts); absent: none. */
  readonly recoveryChars?: number | undefined;
  /** With a window: whether the raw and the final request are over it, and what the window fit did. */
  readonly window?: Readonly<Record<'overRaw' | 'overSent' | 'rewrite' | 'exceeded', boolean>>;
}

/** Effective costs summed: raw, final, and final plus the simulated recoveries' round trips. */
type CostSums = Record<'raw' | 'final' | 'recovered', number>;

/** The sample fields summed as they are. */
const SUMMED = [
  'rawChars',
  'finalChars',
  'rawTokens',
  'finalTokens',
  'rawPrefix',
  'finalPrefix',
  'reusePrefix',
  'reuseBase',
  'receipts',
  'recovered',
] as const;

/** Sums requests; `figures()` applies the definitions above. */
export class FigureAccumulator {
  #n = 0;
  readonly #sum = Object.fromEntries(SUMMED.map((k) => [k, 0])) as Record<(typeof SUMMED)[number], number>;
  /** Under the route's profile and under each built-in one. */
  readonly #cost: Record<'route' | 'openai' | 'anthropic', CostSums> = {
    route: { raw: 0, final: 0, recovered: 0 },
    openai: { raw: 0, final: 0, recovered: 0 },
    anthropic: { raw: 0, final: 0, recovered: 0 },
  };
  readonly #profiles = new Set<string>();
  readonly #fidelity = emptyCounts();
  #extraMs = 0;
  readonly #ms: number[] = [];
  #window: Record<keyof NonNullable<RequestSample['window']>, number> | undefined;

  /** One request, costed under the route's profile and under every built-in one. */
  add(r: RequestSample, route: PricingProfile = PRICING_PROFILES.openai): void {
    this.#n++;
    for (const k of SUMMED) this.#sum[k] += r[k];
    const rawTpc = r.rawChars === 0 ? 0 : r.rawTokens / r.rawChars;
    const finalTpc = r.finalChars === 0 ? 0 : r.finalTokens / r.finalChars;
    for (const k of ['route', 'openai', 'anthropic'] as const) {
      const p = k === 'route' ? route : PRICING_PROFILES[k];
      const into = this.#cost[k];
      into.raw += requestCost(p, r.rawChars, r.rawPrefix, rawTpc);
      const final = requestCost(p, r.finalChars, r.finalPrefix, finalTpc);
      into.final += final;
      into.recovered +=
        final +
        (r.recoveryChars === undefined ? 0 : requestCost(p, r.finalChars + r.recoveryChars, r.finalChars, finalTpc));
    }
    this.#profiles.add(route.name);
    this.#ms.push(r.ms);
    if (r.window !== undefined) {
      const w = (this.#window ??= { overRaw: 0, overSent: 0, rewrite: 0, exceeded: 0 });
      for (const k of Object.keys(w) as (keyof typeof w)[]) w[k] += r.window[k] ? 1 : 0;
    }
  }

  /** The fidelity counts of a session (added once, when the session is done). */
  addFidelity(counts: FidelityCounts): void {
    addCounts(this.#fidelity, counts);
  }

  /** Pipeline time not attributable to a request (tool results after the last request). */
  addTime(ms: number): void {
    this.#extraMs += ms;
  }

  figures(): ReplayTotals {
    const sorted = [...this.#ms].sort((a, b) => a - b);
    const total = this.#ms.reduce((a, b) => a + b, 0) + this.#extraMs;
    const f = this.#fidelity;
    const s = this.#sum;
    const { route, openai, anthropic } = this.#cost;
    return {
      requests: this.#n,
      raw_chars: s.rawChars,
      final_chars: s.finalChars,
      raw_tokens: s.rawTokens,
      final_tokens: s.finalTokens,
      reduction_pct: s.rawTokens === 0 ? 0 : round(((s.rawTokens - s.finalTokens) / s.rawTokens) * 100, 2),
      receipts: s.receipts,
      recovered_exact: s.recovered,
      recovery_failures: s.receipts - s.recovered,
      cache_prefix_ratio_raw: ratio(s.rawPrefix, s.rawChars),
      cache_prefix_ratio_final: ratio(s.finalPrefix, s.finalChars),
      effective_cost_raw: round(route.raw, 3),
      effective_cost_final: round(route.final, 3),
      effective_cost_ratio: ratio(route.final, route.raw),
      p50_ms: round(percentile(sorted, 50), 3),
      p95_ms: round(percentile(sorted, 95), 3),
      total_ms: round(total, 3),
      task_visible_pct: pct(f.tasks_visible, f.requests),
      actions_visible_pct: pct(f.actions_visible, f.actions_checked),
      diagnostics_visible_pct: pct(f.diagnostic_lines_visible, f.diagnostic_lines),
      grounding_pct: pct(f.grounding_strings_visible, f.grounding_strings),
      prefix_reuse: s.reuseBase === 0 ? 1 : round(s.reusePrefix / s.reuseBase, 4),
      pricing_profile:
        this.#profiles.size === 1
          ? [...this.#profiles][0]!
          : this.#profiles.size === 0
            ? PRICING_PROFILES.openai.name
            : 'per-route',
      effective_cost_ratio_openai: ratio(openai.final, openai.raw),
      effective_cost_ratio_anthropic: ratio(anthropic.final, anthropic.raw),
      use_lines_pct: pct(f.use_lines_visible, f.use_lines),
      use_words_pct: pct(f.use_words_visible, f.use_words),
      actions_missing_use_pct: f.use_actions === 0 ? 0 : round((f.use_actions_missing_line / f.use_actions) * 100, 2),
      simulated_recoveries: f.simulated_recoveries,
      effective_cost_with_recoveries_ratio: ratio(route.recovered, route.raw),
      effective_cost_with_recoveries_ratio_openai: ratio(openai.recovered, openai.raw),
      effective_cost_with_recoveries_ratio_anthropic: ratio(anthropic.recovered, anthropic.raw),
      fidelity: { ...f },
      ...(this.#window === undefined
        ? {}
        : {
            requests_over_window_raw: this.#window.overRaw,
            requests_over_window_sent: this.#window.overSent,
            window_rewrites: this.#window.rewrite,
            requests_window_unfittable: this.#window.exceeded,
          }),
    };
  }
}

/**
 * Linear interpolation between closest ranks of an ascending array (numpy default); 0 when empty.
 *
 * @example
 * percentile([1, 2, 3, 4], 50); // 2.5
 * percentile([], 95); // 0
 */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  const rank = ((sorted.length - 1) * p) / 100;
  const lo = Math.floor(rank);
  return sorted[lo]! + (sorted[Math.ceil(rank)]! - sorted[lo]!) * (rank - lo);
}

function ratio(part: number, whole: number): number {
  return whole <= 0 ? 0 : round(part / whole, 4);
}

/**
 * Common prefix, in code points, of canonicalJson(prev) and canonicalJson(cur) for two messages
 * arrays, from the meter's per-message JSON (no whole-array serialization): whole messages that
 * serialize identically are skipped by size, the first differing pair is compared char by char.
 * `prev` undefined (first request of a session) → 0.
 *
 * @example
 * import { createTiktokenCounter } from 'token-terminator';
 * const meter = createMessagesMeter(createTiktokenCounter());
 * const cacheable = commonPrefixChars(previous, current, meter); // code points the two messages arrays share
 */
export function commonPrefixChars(
  prev: readonly unknown[] | undefined,
  cur: readonly unknown[],
  meter: MessagesMeter,
): number {
  if (prev === undefined) return 0;
  const { chars, matched } = sharedItems(prev, cur, meter, 2); // after '[', items joined by ', '
  // All shared positions match: equal arrays share everything; otherwise the shorter one's ']'
  // meets the longer one's ',' (or '{' after an empty '[').
  return matched && prev.length === cur.length ? meter.chars(cur) : 1 + chars;
}

/** Code points two lists share serialized item by item with `gap` chars between items; `matched`: every shared position equal. */
function sharedItems(
  prev: readonly unknown[],
  cur: readonly unknown[],
  meter: MessagesMeter,
  gap: number,
): { chars: number; matched: boolean } {
  let p = 0;
  for (let j = 0; j < Math.min(prev.length, cur.length); j++) {
    const a = meter.entry(prev[j]);
    const b = prev[j] === cur[j] ? a : meter.entry(cur[j]);
    if (j > 0) p += gap;
    if (a !== b && a.json !== b.json) return { chars: p + commonPrefixOfStrings(a.json, b.json), matched: false };
    p += a.chars;
  }
  return { chars: p, matched: true };
}

/**
 * Common prefix of two strings in code points (never splits a surrogate pair).
 *
 * @example
 * commonPrefixOfStrings('abcd', 'abxy'); // 2
 * commonPrefixOfStrings('a\u{1F600}', 'a\u{1F601}'); // 1 (the pair is not split)
 */
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

/**
 * Common prefix of two messages lists over the concatenation of their serialized items (code
 * points), and the size of the first: `[common, size(prev)]`. Whole items that serialize
 * identically are skipped by size; the first differing pair is compared char by char.
 */
export function itemPrefix(prev: readonly unknown[], cur: readonly unknown[], meter: MessagesMeter): [number, number] {
  let size = 0;
  for (const m of prev) size += meter.entry(m).chars;
  return [sharedItems(prev, cur, meter, 0).chars, size];
}
