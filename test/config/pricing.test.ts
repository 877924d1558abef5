import { describe, expect, it } from 'vitest';
import { loadConfig, PRICING_PROFILES, pricingFor, requestCost, routeProfileName } from '../../src/config/index.js';
import { ConfigError } from '../../src/errors.js';

const config = (env: Record<string, string> = {}) => loadConfig({ env: { HOME: '/home/t', ...env } });

describe('pricing profiles', () => {
  it('picks the Anthropic-style profile for Anthropic routes and the OpenAI-style one otherwise', () => {
    expect(routeProfileName({ model: 'claude-sonnet-4-5' })).toBe('anthropic');
    expect(routeProfileName({ provider: 'Anthropic', model: 'x' })).toBe('anthropic');
    expect(routeProfileName({ model: 'custom' }, 'anthropic')).toBe('anthropic');
    expect(routeProfileName({ model: 'gpt-4o' }, 'chat')).toBe('openai');
    expect(routeProfileName(undefined)).toBe('openai');
    expect(routeProfileName({ model: 'claude-3', pricing: 'openai' })).toBe('openai');
    expect(pricingFor(config(), { model: 'claude-opus' })).toEqual(PRICING_PROFILES.anthropic);
    expect(pricingFor(config(), { model: 'gpt-5' })).toEqual({
      name: 'openai',
      cacheRead: 0.1,
      cacheWrite: 1,
      minCachePrefixTokens: 1024,
    });
  });

  it('applies the configured profile and multipliers (env), and a route-carried profile beats them', () => {
    expect(pricingFor(config({ TOKEN_TERMINATOR_PRICING_PROFILE: 'anthropic' }), { model: 'gpt-5' }).name).toBe(
      'anthropic',
    );
    const custom = pricingFor(
      config({ TOKEN_TERMINATOR_CACHE_READ_MULTIPLIER: '0.25', TOKEN_TERMINATOR_MIN_CACHE_PREFIX_TOKENS: '2048' }),
      { model: 'gpt-4.1' },
    );
    expect(custom).toEqual({ name: 'custom', cacheRead: 0.25, cacheWrite: 1, minCachePrefixTokens: 2048 });
    const carried = { name: 'mine', cacheRead: 0.5, cacheWrite: 1, minCachePrefixTokens: 0 };
    expect(pricingFor(config({ TOKEN_TERMINATOR_CACHE_READ_MULTIPLIER: '0.25' }), { pricing: carried })).toBe(carried);
    expect(() =>
      pricingFor(config(), { pricing: { name: 'bad', cacheRead: 0.5, cacheWrite: 0.2, minCachePrefixTokens: 0 } }),
    ).toThrow(ConfigError);
    expect(() =>
      pricingFor(config(), { pricing: { name: 'bad', cacheRead: 0.5, cacheWrite: 0.2, minCachePrefixTokens: 0 } }),
    ).toThrow(/route\.pricing/);
  });

  it('costs a request: cached prefix at the read price, the rest at the write price, nothing cached below the minimum', () => {
    const a = PRICING_PROFILES.anthropic;
    expect(requestCost(a, 10_000, 8_000)).toBeCloseTo(0.1 * 8000 + 1.25 * 2000);
    expect(requestCost(PRICING_PROFILES.openai, 10_000, 8_000)).toBeCloseTo(0.1 * 8000 + 2000);
    // A prefix below 1,024 tokens is not a hit (the whole request is written); a request below it is not cached at all.
    expect(requestCost(a, 10_000, 1_000)).toBeCloseTo(1.25 * 10_000);
    expect(requestCost(a, 1_000, 900)).toBe(1_000);
    // Chars → tokens: 4,000 chars at 0.25 tokens per char are 1,000 tokens, below the minimum.
    expect(requestCost(a, 4_000, 3_000, 0.25)).toBe(4_000);
  });
});
