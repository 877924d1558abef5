/** A small LRU map with a time-to-live checked on read (rewrite cache). */
export class TtlLru<V> {
  readonly #entries = new Map<string, { value: V; at: number }>();
  constructor(
    private readonly maxSize: number,
    private readonly ttlMs: number,
    private readonly now: () => number,
  ) {}

  /** The live value (refreshing its recency), or undefined when absent or expired. */
  get(key: string): V | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    this.#entries.delete(key);
    if (this.now() - entry.at > this.ttlMs) return undefined;
    this.#entries.set(key, entry);
    return entry.value;
  }

  set(key: string, value: V): void {
    this.#entries.delete(key);
    this.#entries.set(key, { value, at: this.now() });
    while (this.#entries.size > this.maxSize) this.#entries.delete(this.#entries.keys().next().value!);
  }

  get size(): number {
    return this.#entries.size;
  }
}
