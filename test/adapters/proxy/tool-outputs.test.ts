import { describe, expect, it } from 'vitest';
import { RenderingCache } from '../../../adapters/shared/tool-outputs.js';
import { ConfigError } from '../../../src/errors.js';

describe('RenderingCache', () => {
  it('keeps 50,000 entries by default: the 50,001st set drops the first written', () => {
    const cache = new RenderingCache();
    for (let i = 0; i <= 50_000; i++) cache.set(`s\u0000k${i}`, `v${i}`);
    expect(cache.size).toBe(50_000);
    expect(cache.get('s\u0000k0')).toBeUndefined();
    let kept = 0;
    for (let i = 1; i <= 50_000; i++) if (cache.get(`s\u0000k${i}`) === `v${i}`) kept++;
    expect(kept).toBe(50_000);
  });

  it('drops the least recently written entry: a read does not refresh it, a write does', () => {
    const cache = new RenderingCache(3);
    for (const k of ['a', 'b', 'c']) cache.set(k, k);
    expect(cache.get('a')).toBe('a');
    cache.set('d', 'd');
    expect(cache.get('a')).toBeUndefined();
    cache.set('b', 'b2');
    cache.set('e', 'e');
    expect(['b', 'c', 'd', 'e'].map((k) => cache.get(k))).toEqual(['b2', undefined, 'd', 'e']);
    expect(cache.size).toBe(3);
  });

  it('rejects a bound that is not an integer ≥ 1 with a ConfigError', () => {
    for (const max of [0, -1, 1.5, Number.NaN]) {
      expect(() => new RenderingCache(max)).toThrow(ConfigError);
      expect(() => new RenderingCache(max)).toThrow(`RenderingCache: max must be an integer ≥ 1 (got ${String(max)})`);
    }
  });
});
