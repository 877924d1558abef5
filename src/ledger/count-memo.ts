import { createHash } from 'node:crypto';
import { entryBoundLru } from '../lru.js';
import { intOption } from '../options.js';
import type { TokenCounter } from '../measure/types.js';

/** Strings longer than this are keyed by SHA-256 instead of by themselves. */
export const DEFAULT_HASH_ABOVE = 256;

/**
 * The memo key of `text`: the text itself when at most `hashAbove` code units, else its length
 * and SHA-256 (hashing runs at ~1 GB/s, BPE at a few MB/s), so no long content is retained.
 *
 * @example
 * contentKey('ls -la'); // 'sls -la'
 * contentKey('x'.repeat(10_000), 1024); // 'h10000:…' (length and SHA-256)
 */
export function contentKey(text: string, hashAbove: number = DEFAULT_HASH_ABOVE): string {
  if (text.length <= hashAbove) return `s${text}`;
  return `h${text.length}:${createHash('sha256').update(text, 'utf8').digest('base64')}`;
}

/**
 * The memo key of a text of `length` code units that the item ledger names by `digest` (a
 * collision-free name of exactly that text, such as an item's identity): what a caller that holds
 * the digest passes to {@link TokenCounter.count}, so no memo hashes the text again. Its own
 * prefix keeps it apart from {@link contentKey}'s keys.
 *
 * @example
 * digestKey(40_000, 'q3Zx…='); // 'd40000:q3Zx…='
 */
export function digestKey(length: number, digest: string): string {
  return `d${length}:${digest}`;
}

/** Options of the token-count memo; every field is optional. */
export interface CountMemoOptions {
  /**
   * Most remembered contents (least recently used dropped first).
   *
   * @defaultValue 4096
   */
  readonly maxEntries?: number;
  /**
   * Strings longer than this are keyed by SHA-256 instead of by themselves.
   *
   * @defaultValue 256
   */
  readonly hashAbove?: number;
}

/** A memoizing TokenCounter with its hit statistics. */
export interface CountMemo extends TokenCounter {
  readonly stats: { readonly hits: number; readonly misses: number; readonly size: number };
  clear(): void;
}

/**
 * Wrap a counter so the same content is never counted twice. Keys are the text itself when short,
 * else its SHA-256 and length (see {@link contentKey}). The memo is bounded (LRU) and keeps no
 * content longer than `hashAbove` chars.
 *
 * @example
 * const memo = createCountMemo(createTiktokenCounter(), { maxEntries: 1000 });
 * memo.count(big); memo.count(big); // second call is a lookup
 * @throws ConfigError when `maxEntries` is not an integer ≥ 1 or `hashAbove` not an integer ≥ 0.
 */
export function createCountMemo(counter: TokenCounter, options: CountMemoOptions = {}): CountMemo {
  const maxEntries = intOption('createCountMemo', 'maxEntries', options.maxEntries, 4096, 1);
  const hashAbove = intOption('createCountMemo', 'hashAbove', options.hashAbove, DEFAULT_HASH_ABOVE, 0);
  // lru-cache, not a Map refreshed by delete-and-set: a Map's oldest key is found by walking past
  // every entry deleted before it (tens of microseconds per new key in a full 65,536-entry table).
  const table = entryBoundLru<string, number>(maxEntries);
  let hits = 0;
  let misses = 0;
  const clear = (): void => {
    table.clear();
    hits = misses = 0;
  };
  const memo: CountMemo = {
    name: counter.name,
    exact: counter.exact,
    ...(counter.countsKey === undefined ? {} : { countsKey: counter.countsKey }),
    get stats() {
      return { hits, misses, size: table.size };
    },
    count(text: string, given?: string): number {
      // Stacked memos hand a hashed key down, so a long text is hashed once whatever the layers (a
      // short text's key is the text: the layer below keys it its own way, within its key bound).
      const key = given ?? contentKey(text, hashAbove);
      const known = table.get(key);
      if (known !== undefined) {
        hits++;
        return known;
      }
      misses++;
      const n = counter.count(text, text.length <= hashAbove ? undefined : key);
      table.set(key, n);
      return n;
    },
    clear,
  };
  if (counter.dispose !== undefined) {
    const dispose = counter.dispose.bind(counter);
    memo.dispose = (): void => {
      clear();
      dispose();
    };
  }
  return memo;
}
