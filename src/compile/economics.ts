/**
 * The cache-economic rewrite rule (docs/cache-policy.md): of the batches "every candidate from the
 * k-th oldest on", take the one whose expected saving in later requests, less the cache it breaks
 * now and the recoveries its digests may cause, is largest and positive. Pure arithmetic on sizes:
 * the same request always yields the same decision.
 */
import { requestCost, type PricingProfile } from '../config/pricing.js';

/** One old item that could be re-rendered smaller. */
export interface RewriteCandidate {
  /** Offset of the item in the request as it would be sent unchanged (chars). */
  readonly position: number;
  /** Chars the new rendering removes. */
  readonly saved: number;
  /** Expected cost of the recoveries the new rendering may cause (uncached-char units); default 0. */
  readonly recovery?: number;
}

export interface RewriteQuestion {
  /** Size of the request as it would be sent unchanged (chars). */
  readonly size: number;
  /** How much of it the previous request already sent, byte for byte (its cacheable prefix). */
  readonly cachedEnd: number;
  /** Requests expected after this one in the conversation. */
  readonly requestsAhead: number;
  readonly pricing: PricingProfile;
  /** Sorted by position. */
  readonly candidates: readonly RewriteCandidate[];
}

export interface RewriteAnswer {
  /** Index of the first candidate of the batch (the batch is every candidate from it on). */
  readonly from: number;
  /** Expected saving net of the lost cache, in uncached-char units. */
  readonly net: number;
  /** The extra cost of this request (negative when the rewrite already pays now). */
  readonly now: number;
}

/**
 * The best batch, or undefined when no batch pays for the cache it breaks.
 *
 * @example
 * chooseBatch({ size: 60_000, cachedEnd: 55_000, requestsAhead: 10, pricing: PRICING_PROFILES.openai, candidates: [{ position: 50_000, saved: 4_500 }] });
 * // → { from: 0, … } (a 5k-char output at the tail is worth replacing)
 */
export function chooseBatch(q: RewriteQuestion): RewriteAnswer | undefined {
  // 4 chars a token: sizes are compared with the profile's minimum cacheable prefix in tokens.
  const cost = (size: number, cached: number): number => requestCost(q.pricing, size, Math.min(cached, size), 1 / 4);
  const keepNow = cost(q.size, q.cachedEnd);
  let best: RewriteAnswer | undefined;
  let removed = 0;
  let recoveries = 0;
  for (let i = q.candidates.length - 1; i >= 0; i--) {
    const c = q.candidates[i]!;
    removed += c.saved;
    recoveries += c.recovery ?? 0;
    const size = q.size - removed;
    const now = cost(size, Math.min(c.position, q.cachedEnd)) - keepNow;
    // Every later request reads the shorter history from cache (later requests are larger, so a
    // minimum the request is near now does not bound them).
    const perRequest = q.pricing.cacheRead * removed;
    const net = q.requestsAhead * perRequest - now - recoveries;
    if (net > 0 && (best === undefined || net > best.net)) best = { from: i, net, now };
  }
  return best;
}
