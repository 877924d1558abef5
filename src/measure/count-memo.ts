import { createHash } from 'node:crypto';
import type { TokenCounter } from './types.js';

export interface CountMemoOptions {
  /** Most remembered contents (least recently used dropped first). Default 4096. */
  readonly maxEntries?: number;
  /** Strings longer than this are keyed by SHA-256 instead of by themselves. Default 256. */
  readonly hashAbove?: number;
}

/** A memoizing TokenCounter with its hit statistics. */
export interface CountMemo extends TokenCounter {
  readonly stats: { readonly hits: number; readonly misses: number; readonly size: number };
  clear(): void;
}

/**
 * Wrap a counter so the same content is never counted twice. Keys are the text itself when short,
 * else its SHA-256 and length (hashing runs at ~1 GB/s, BPE at a few MB/s). The memo is bounded
 * (LRU) and keeps no content longer than `hashAbove` chars.
 *
 * @example
 * const memo = createCountMemo(createTiktokenCounter(), { maxEntries: 1000 });
 * memo.count(big); memo.count(big); // second call is a lookup
 */
export function createCountMemo(counter: TokenCounter, options: CountMemoOptions = {}): CountMemo {
  const maxEntries = options.maxEntries ?? 4096;
  const hashAbove = options.hashAbove ?? 256;
  if (!Number.isInteger(maxEntries) || maxEntries < 1) throw new TypeError('createCountMemo: maxEntries must be an integer ≥ 1');
  if (!Number.isInteger(hashAbove) || hashAbove < 0) throw new TypeError('createCountMemo: hashAbove must be an integer ≥ 0');
  const entries = new Map<string, number>();
  let hits = 0;
  let misses = 0;
  const keyOf = (text: string): string =>
    text.length <= hashAbove ? `s${text}` : `h${text.length}:${createHash('sha256').update(text, 'utf8').digest('base64')}`;
  const memo: CountMemo = {
    name: counter.name,
    exact: counter.exact,
    get stats() {
      return { hits, misses, size: entries.size };
    },
    count(text: string): number {
      const key = keyOf(text);
      const known = entries.get(key);
      if (known !== undefined) {
        hits++;
        entries.delete(key);
        entries.set(key, known);
        return known;
      }
      misses++;
      const n = counter.count(text);
      entries.set(key, n);
      if (entries.size > maxEntries) {
        const oldest = entries.keys().next();
        if (oldest.done !== true) entries.delete(oldest.value);
      }
      return n;
    },
    clear(): void {
      entries.clear();
    },
  };
  if (counter.dispose !== undefined) {
    const dispose = counter.dispose.bind(counter);
    memo.dispose = (): void => {
      entries.clear();
      dispose();
    };
  }
  return memo;
}
