import { describe, expect, it } from 'vitest';
import { ItemMemo, RenderingCache } from '../../../adapters/proxy/tool-outputs.js';
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

describe('memory bounds of the proxy caches', () => {
  it('RenderingCache keeps keys and values within maxChars, dropping the least recently written first', () => {
    const cache = new RenderingCache(1000, 300);
    for (let i = 0; i < 10; i++) cache.set(`k${i}`, 'x'.repeat(98)); // 100 chars each
    expect(cache.size).toBe(3);
    expect(['k6', 'k7', 'k8', 'k9'].map((k) => cache.get(k) !== undefined)).toEqual([false, true, true, true]);
    cache.clear();
    expect(cache.size).toBe(0);
  });

  it('ItemMemo keeps remembered items within maxChars, dropping the least recently used sessions, never the one in use', () => {
    const memo = new ItemMemo(256, 4096, 1000);
    const entry = (chars: number) => ({ item: {}, original: {}, changed: false, chars });
    const a = memo.session('a');
    memo.remember(a, 'd1', entry(400));
    const b = memo.session('b');
    memo.remember(b, 'd2', entry(400));
    // Over the bound: a (least recently used) goes, b stays.
    const c = memo.session('c');
    memo.remember(c, 'd3', entry(400));
    expect(memo.session('a').byDigest.size).toBe(0);
    expect(memo.session('c').byDigest.get('d3')?.chars).toBe(400);
    // One session larger than the bound keeps its items.
    const big = memo.session('big');
    memo.remember(big, 'd4', entry(5000));
    expect(memo.session('big').byDigest.size).toBe(1);
    memo.clear();
    expect(memo.session('big').byDigest.size).toBe(0);
  });
});
