import { LRUCache } from 'lru-cache';

/**
 * An LRU of at most `maxEntries` entries whose storage grows with what it holds: bounded by
 * lru-cache's `maxSize` at one per entry, not by `max`, which allocates storage for `max` entries
 * up front (about 300 KB at 20,000) however few are ever held.
 *
 * @example
 * const seen = entryBoundLru<string, number>(20_000);
 * seen.set('a', 1); // least recently used dropped past 20,000
 */
export function entryBoundLru<K extends NonNullable<unknown>, V extends NonNullable<unknown>>(
  maxEntries: number,
  options: Omit<LRUCache.Options<K, V, unknown>, 'max' | 'maxSize' | 'sizeCalculation'> = {},
): LRUCache<K, V> {
  return new LRUCache<K, V>({ ...options, maxSize: maxEntries, sizeCalculation: () => 1 });
}
