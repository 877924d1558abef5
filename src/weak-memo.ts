/**
 * A memo keyed by object identity whose memory follows what is live, not what was ever seen.
 *
 * A plain WeakMap drops an entry once its key is collected, but V8 never shrinks the map's hash
 * table when the collector clears entries: a memo keyed by the objects of every request (a host
 * that rebuilds its messages per call, the proxy's parsed bodies) keeps a table as large as the
 * most dead-but-uncollected keys it ever held, which grows with the time between full collections.
 * This memo writes into a current WeakMap and, after `generation` new keys, starts a fresh one;
 * the previous generation still answers (and a hit moves the entry into the current one), so a
 * key in use is never forgotten, and the table of two generations ago is released whole.
 *
 * Only for caches: a value may be recomputed after two generations without its key being used.
 *
 * @example
 * const lengths = new WeakMemo<object, number>(1024);
 * lengths.set(message, JSON.stringify(message).length);
 * lengths.get(message); // the length, also after 1,023 other messages were added
 */
export class WeakMemo<K extends object, V> {
  #current = new WeakMap<K, V>();
  #previous = new WeakMap<K, V>();
  #added = 0;

  /** @param generation - New keys per generation (the current map is replaced after this many). Default 2048. */
  constructor(readonly generation = 2048) {
    if (!Number.isInteger(generation) || generation < 1)
      throw new RangeError(`WeakMemo: generation must be a positive integer, got ${String(generation)}`);
  }

  get(key: K): V | undefined {
    const value = this.#current.get(key);
    if (value !== undefined || this.#current.has(key)) return value;
    if (!this.#previous.has(key)) return undefined;
    const old = this.#previous.get(key) as V;
    this.#previous.delete(key);
    this.set(key, old);
    return old;
  }

  has(key: K): boolean {
    return this.#current.has(key) || this.#previous.has(key);
  }

  set(key: K, value: V): this {
    if (!this.#current.has(key)) {
      this.#previous.delete(key);
      if (this.#added >= this.generation) {
        this.#previous = this.#current;
        this.#current = new WeakMap();
        this.#added = 0;
      }
      this.#added++;
    }
    this.#current.set(key, value);
    return this;
  }

  delete(key: K): boolean {
    const a = this.#current.delete(key);
    const b = this.#previous.delete(key);
    return a || b;
  }
}
