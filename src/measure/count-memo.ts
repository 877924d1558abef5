import { createHash } from 'node:crypto';
import type { LRUCache } from 'lru-cache';
import { ConfigError } from '../errors.js';
import { entryBoundLru } from '../lru.js';
import { intOption } from '../options.js';
import type { TokenCounter } from './types.js';

/** Strings longer than this are keyed by SHA-256 instead of by themselves (both memo kinds). */
export const DEFAULT_HASH_ABOVE = 256;

/**
 * The memo key of `text`: the text itself when at most `hashAbove` code units, else its length
 * and SHA-256 (hashing runs at ~1 GB/s, BPE at a few MB/s), so no long content is retained.
 *
 * @example
 * import { contentKey } from 'token-terminator';
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
 * A bounded LRU of content key → count. lru-cache, not a Map refreshed by delete-and-set: a
 * Map's oldest key is found by walking past every entry deleted before it, which cost a full
 * 65,536-entry table tens of microseconds per new key.
 */
class CountTable {
  readonly #entries: LRUCache<string, number>;
  #keyChars = 0;
  hits = 0;
  misses = 0;

  constructor(maxEntries: number) {
    this.#entries = entryBoundLru<string, number>(maxEntries, {
      dispose: (_n, key) => {
        this.#keyChars -= key.length;
      },
    });
  }

  get size(): number {
    return this.#entries.size;
  }

  /** Sum of key lengths (the table's only variable-size content). */
  get keyChars(): number {
    return this.#keyChars;
  }

  get(key: string): number | undefined {
    const known = this.#entries.get(key);
    if (known === undefined) this.misses++;
    else this.hits++;
    return known;
  }

  set(key: string, n: number): void {
    if (this.#entries.has(key)) return;
    this.#keyChars += key.length;
    this.#entries.set(key, n);
  }

  clear(): void {
    this.#entries.clear();
    this.#keyChars = 0;
    this.hits = 0;
    this.misses = 0;
  }
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
  const table = new CountTable(maxEntries);
  const memo: CountMemo = {
    name: counter.name,
    exact: counter.exact,
    ...(counter.countsKey === undefined ? {} : { countsKey: counter.countsKey }),
    get stats() {
      return { hits: table.hits, misses: table.misses, size: table.size };
    },
    count(text: string, given?: string): number {
      // Stacked memos hand a hashed key down, so a long text is hashed once whatever the layers (a
      // short text's key is the text: the layer below keys it its own way, within its key bound).
      const key = given ?? contentKey(text, hashAbove);
      const known = table.get(key);
      if (known !== undefined) return known;
      const n = counter.count(text, text.length <= hashAbove ? undefined : key);
      table.set(key, n);
      return n;
    },
    clear(): void {
      table.clear();
    },
  };
  if (counter.dispose !== undefined) {
    const dispose = counter.dispose.bind(counter);
    memo.dispose = (): void => {
      table.clear();
      dispose();
    };
  }
  return memo;
}

// ---------------------------------------------------------------------------------------------
// The process-wide memo: one table per counting function (an encoding and its long-run cut),
// shared by every counter built for it, so a string is tokenized at most once per process
// whichever stage, session or Terminator asks. It is the one process-wide cache, bounded by
// DEFAULT_SHARED_MEMO_ENTRIES per table; a counter built with `memo: false` bypasses it.

/** The bound of each process-wide table (entries; least recently used dropped first). */
export const DEFAULT_SHARED_MEMO_ENTRIES = 65_536;

/** Strings up to this length are keyed by themselves in the process-wide tables. */
const SHARED_HASH_ABOVE = 64;

/** What a set of count tables holds. */
export interface SharedCountMemoStats {
  /** Tables (one per encoding and long-run cut in use). */
  readonly tables: number;
  readonly entries: number;
  readonly hits: number;
  readonly misses: number;
  /** Sum of key lengths in UTF-16 code units: keys are ≤ 65 chars, or `h<len>:<sha256>`. */
  readonly keyChars: number;
  /** The per-table entry bound. */
  readonly maxEntries: number;
}

/**
 * Count tables by counting-function id, each a bounded LRU of content key → count. The process
 * holds one (behind {@link countShared}); a test or bench may build its own with another bound.
 *
 * @example
 * const tables = new CountTables(3);
 * tables.count('o200k_base/demo', 'hello', (t) => t.length); // counted, then served
 */
export class CountTables {
  readonly #tables = new Map<string, CountTable>();

  /** @param maxEntries - Bound of each table (an integer ≥ 1). */
  constructor(readonly maxEntries: number) {
    if (!Number.isInteger(maxEntries) || maxEntries < 1)
      throw new ConfigError(`CountTables: maxEntries must be an integer ≥ 1 (got ${String(maxEntries)})`);
  }

  /** `text` counted through table `id`, calling `count` only on a miss; `key` names exactly `text` when the caller has one. */
  count(id: string, text: string, count: (text: string) => number, key?: string): number {
    let table = this.#tables.get(id);
    if (table === undefined) {
      table = new CountTable(this.maxEntries);
      this.#tables.set(id, table);
    }
    const k = key ?? contentKey(text, SHARED_HASH_ABOVE);
    const known = table.get(k);
    if (known !== undefined) return known;
    const n = count(text);
    table.set(k, n);
    return n;
  }

  stats(): SharedCountMemoStats {
    let entries = 0;
    let hits = 0;
    let misses = 0;
    let keyChars = 0;
    for (const t of this.#tables.values()) {
      entries += t.size;
      hits += t.hits;
      misses += t.misses;
      keyChars += t.keyChars;
    }
    return { tables: this.#tables.size, entries, hits, misses, keyChars, maxEntries: this.maxEntries };
  }

  clear(): void {
    for (const t of this.#tables.values()) t.clear();
    this.#tables.clear();
  }
}

const shared = new CountTables(DEFAULT_SHARED_MEMO_ENTRIES);

/**
 * Count `text` through the process-wide table `id` (e.g. `o200k_base/1024`), calling `count`
 * only on a miss. `count` must be a pure function of the text for that id.
 *
 * @example
 * import { countShared } from 'token-terminator';
 * import { encode } from 'gpt-tokenizer';
 * const count = (text: string): number => encode(text).length;
 * countShared('o200k_base/demo', 'hello world', count); // counted
 * countShared('o200k_base/demo', 'hello world', count); // served from the table
 */
export function countShared(id: string, text: string, count: (text: string) => number, key?: string): number {
  return shared.count(id, text, count, key);
}

/**
 * Statistics of the process-wide memo (for benches, status and tests).
 *
 * @example
 * import { sharedCountMemoStats } from 'token-terminator';
 * const { entries, hits, misses } = sharedCountMemoStats();
 */
export function sharedCountMemoStats(): SharedCountMemoStats {
  return shared.stats();
}

/**
 * Empty the process-wide tables and their statistics.
 *
 * @example
 * import { clearSharedCountMemo, sharedCountMemoStats } from 'token-terminator';
 * clearSharedCountMemo();
 * sharedCountMemoStats().entries; // 0
 */
export function clearSharedCountMemo(): void {
  shared.clear();
}
