/**
 * Prompt-cache pricing profiles: what a provider charges for the part of a request it serves from
 * its prompt cache, for the part it writes to the cache, and from which size a prefix is cached at
 * all. Multipliers are relative to the normal input price. The request stages use the route's
 * profile to decide whether rewriting history pays (docs/cache-policy.md); `replay` reports the
 * effective cost under every built-in profile.
 *
 * Built-ins (facts: provider documentation, late 2025):
 * - `openai`: cache reads at 0.1 × (GPT-5-family models), no write premium, 1,024-token minimum;
 * - `anthropic`: cache reads at 0.1 ×, 5-minute cache writes at 1.25 ×, 1,024-token minimum.
 */
import { ConfigError } from '../errors.js';
import type { Config } from './types.js';
import { definedFields } from '../options.js';

/** The part of a step's route (src/step.ts `Route`) that picks a pricing profile. */
interface PricedRoute {
  readonly model?: string;
  readonly provider?: string;
  readonly pricing?: PricingProfileName | PricingProfile;
}

/** Prompt-cache prices relative to an uncached input token, used to decide whether a history rewrite pays for the cache it breaks. */
export interface PricingProfile {
  /** `openai`, `anthropic`, or `custom` when the numbers were overridden. */
  readonly name: string;
  /** Price of a cache-read input token relative to an uncached one (0…1). */
  readonly cacheRead: number;
  /** Price of an input token written to the cache relative to an uncached one (≥ 1 on Anthropic, 1 on OpenAI). */
  readonly cacheWrite: number;
  /** Requests (and prefixes) shorter than this many tokens are not cached at all. */
  readonly minCachePrefixTokens: number;
}

/** Name of a built-in pricing profile. */
export type PricingProfileName = 'openai' | 'anthropic';
/**
 * The names of the built-in pricing profiles.
 *
 * @example
 * import { PRICING_PROFILE_NAMES } from './pricing.js';
 * const known = (name: string): boolean => (PRICING_PROFILE_NAMES as readonly string[]).includes(name);
 */
export const PRICING_PROFILE_NAMES: readonly PricingProfileName[] = Object.freeze(['openai', 'anthropic']);

/**
 * The built-in prompt-cache pricing profiles, relative to an uncached input token.
 *
 * @example
 * import { PRICING_PROFILES } from 'token-terminator';
 * PRICING_PROFILES.anthropic.cacheWrite; // 1.25: a cache write costs a quarter more than plain input
 */
export const PRICING_PROFILES: Readonly<Record<PricingProfileName, PricingProfile>> = Object.freeze({
  openai: Object.freeze({ name: 'openai', cacheRead: 0.1, cacheWrite: 1.0, minCachePrefixTokens: 1024 }),
  anthropic: Object.freeze({ name: 'anthropic', cacheRead: 0.1, cacheWrite: 1.25, minCachePrefixTokens: 1024 }),
});

/** The pricing fields of a Config. */
export type PricingSettings = Pick<
  Config,
  'pricingProfile' | 'cacheReadMultiplier' | 'cacheWriteMultiplier' | 'minCachePrefixTokens'
>;

/**
 * The built-in profile a route uses when none is configured: `anthropic` when the route names the
 * Anthropic provider, a Claude model, or the request is in Anthropic Messages format; `openai`
 * otherwise (OpenAI, and providers that bill cache hits without a write premium).
 *
 * @example
 * routeProfileName({ model: 'claude-sonnet-4' }); // 'anthropic'
 * routeProfileName({ model: 'gpt-5' }); // 'openai'
 */
export function routeProfileName(route: PricedRoute | undefined, format?: string): PricingProfileName {
  if (route?.pricing !== undefined) return typeof route.pricing === 'string' ? route.pricing : 'openai';
  const provider = route?.provider?.toLowerCase() ?? '';
  const model = route?.model?.toLowerCase() ?? '';
  if (
    provider.includes('anthropic') ||
    provider.includes('bedrock') ||
    model.includes('claude') ||
    format === 'anthropic'
  )
    return 'anthropic';
  return 'openai';
}

/**
 * A profile with the configured overrides applied; `custom` when any number differs from the built-in.
 *
 * @example
 * import { PRICING_PROFILES, applyOverrides } from 'token-terminator';
 * const profile = applyOverrides(PRICING_PROFILES.openai, { cacheRead: 0.25 }); // name: 'custom'
 */
export function applyOverrides(base: PricingProfile, overrides: Partial<Omit<PricingProfile, 'name'>>): PricingProfile {
  const cacheRead = overrides.cacheRead ?? base.cacheRead;
  const cacheWrite = overrides.cacheWrite ?? base.cacheWrite;
  const minCachePrefixTokens = overrides.minCachePrefixTokens ?? base.minCachePrefixTokens;
  const same =
    cacheRead === base.cacheRead &&
    cacheWrite === base.cacheWrite &&
    minCachePrefixTokens === base.minCachePrefixTokens;
  return validateProfile(
    'pricing',
    Object.freeze({ name: same ? base.name : 'custom', cacheRead, cacheWrite, minCachePrefixTokens }),
  );
}

/**
 * The pricing profile of a route: the route's own profile when it carries one, else the configured
 * profile (`auto` picks by route, see {@link routeProfileName}), with the configured multipliers.
 *
 * @example
 * pricingFor(config, { model: 'claude-sonnet-4-5' }).cacheWrite; // 1.25
 */
export function pricingFor(settings: PricingSettings, route?: PricedRoute, format?: string): PricingProfile {
  if (route?.pricing !== undefined && typeof route.pricing === 'object')
    return validateProfile('route.pricing', route.pricing);
  const name =
    settings.pricingProfile === 'auto' || route?.pricing !== undefined
      ? routeProfileName(route, format)
      : settings.pricingProfile;
  const { cacheReadMultiplier: cacheRead, cacheWriteMultiplier: cacheWrite, minCachePrefixTokens } = settings;
  return applyOverrides(PRICING_PROFILES[name], definedFields({ cacheRead, cacheWrite, minCachePrefixTokens }));
}

/**
 * Reject profiles no provider could bill (reads dearer than writes, negative prices).
 *
 * @example
 * validateProfile('myApp', { name: 'custom', cacheRead: 0.2, cacheWrite: 1.1, minCachePrefixTokens: 1024 });
 * // throws a ConfigError for cacheRead: 2 (reads dearer than writes)
 */
export function validateProfile(api: string, p: PricingProfile): PricingProfile {
  const ok =
    Number.isFinite(p.cacheRead) &&
    Number.isFinite(p.cacheWrite) &&
    p.cacheRead >= 0 &&
    p.cacheRead <= 1 &&
    p.cacheWrite >= p.cacheRead &&
    Number.isInteger(p.minCachePrefixTokens) &&
    p.minCachePrefixTokens >= 0;
  if (!ok)
    throw new ConfigError(
      `${api}: a pricing profile needs 0 ≤ cacheRead ≤ 1, cacheWrite ≥ cacheRead and an integer minCachePrefixTokens ≥ 0`,
    );
  return p;
}

/**
 * Input cost of one request of `size` units whose first `cached` units the provider may serve from
 * its cache, relative to sending it uncached: a request below the minimum is not cached (and not
 * written); otherwise the cached prefix (when it reaches the minimum) costs `cacheRead` and the rest
 * is written to the cache at `cacheWrite`. `tokensPerUnit` converts units to tokens for the minimum.
 *
 * @example
 * import { PRICING_PROFILES } from 'token-terminator';
 * // 4000 tokens, the first 3000 served from the cache: 0.1 × 3000 + 1 × 1000
 * requestCost(PRICING_PROFILES.openai, 4000, 3000); // 1300
 */
export function requestCost(p: PricingProfile, size: number, cached: number, tokensPerUnit = 1): number {
  if (size * tokensPerUnit < p.minCachePrefixTokens) return size;
  const hit = cached * tokensPerUnit >= p.minCachePrefixTokens ? Math.min(cached, size) : 0;
  return p.cacheRead * hit + p.cacheWrite * (size - hit);
}
