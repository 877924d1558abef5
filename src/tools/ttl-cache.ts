import { LRUCache } from 'lru-cache';

/**
 * A small LRU map with a time-to-live checked on read (rewrite cache). lru-cache keeps the order;
 * the age is read from the caller's clock here, because lru-cache's own TTL reads a cached clock
 * and treats an entry stored at time 0 as never stale.
 */
export class TtlLru<V> {
  readonly #entries: LRUCache<string, { value: V; at: number }>;
  constructor(
    maxSize: number,
    private readonly ttlMs: number,
    private readonly now: () => number,
  ) {
    this.#entries = new LRUCache({ max: maxSize });
  }

  /** The live value (refreshing its recency), or undefined when absent or expired. */
  get(key: string): V | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    if (this.now() - entry.at > this.ttlMs) {
      this.#entries.delete(key);
      return undefined;
    }
    return entry.value;
  }

  set(key: string, value: V): void {
    this.#entries.set(key, { value, at: this.now() });
  }

  get size(): number {
    return this.#entries.size;
  }
}
