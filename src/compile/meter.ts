/**
 * The per-session memo that makes request measurement incremental: each conversation item is
 * serialized, hashed and (when asked) tokenized once, keyed by object identity, with a content
 * hash fallback for hosts that rebuild their objects every call. A request's size is then the
 * sum of its items' sizes plus framing, so a request with k new items costs about those k.
 */
import { createHash } from 'node:crypto';
import {
  canonicalJson,
  codePoints,
  serializedArrayChars,
  serializedChars,
  serializedObjectChars,
} from '../measure/index.js';
import type { TokenCounter } from '../measure/types.js';
import { WeakMemo } from '../weak-memo.js';

export interface ItemMeasure {
  /** serializedChars of the item (Python-compatible JSON, code points). */
  readonly chars: number;
  /** SHA-256 (base64) of the item's compact canonical JSON: its content identity. */
  readonly hash: string;
}

interface Entry extends ItemMeasure {
  tokens?: number;
}

/** Serializations kept for items measured but not yet tokenized (the current request's items). */
const COMPACT_KEPT = 64;

export interface Meter {
  /** Size and content hash of one item (memoized). */
  measure(item: unknown): ItemMeasure;
  /** Tokens of one item's compact canonical JSON (memoized by content); undefined without a counter. */
  tokens(item: unknown): number | undefined;
  /** serializedChars of a whole request whose conversation list is `items` under `listKey`. */
  requestChars(
    request: Readonly<Record<string, unknown>>,
    listKey: string | undefined,
    items: readonly unknown[],
  ): number;
  /** Token estimate of a whole request: Σ item tokens + other top-level values (exact counter only). */
  requestTokens(
    request: Readonly<Record<string, unknown>>,
    listKey: string | undefined,
    items: readonly unknown[],
  ): number | undefined;
  /** Content-hash memo entries currently held (for tests and stats). */
  readonly size: number;
}

export interface MeterOptions {
  /** Counter for token sizes; tokens are only computed when it is exact. Default: none. */
  readonly counter?: TokenCounter;
  /** Content-hash entries kept (least recently used dropped). Default 20,000. */
  readonly maxEntries?: number;
}

/** Create a meter; hold one per session (per subscription). */
export function createMeter(options: MeterOptions = {}): Meter {
  const counter = options.counter?.exact === true ? options.counter : undefined;
  const maxEntries = options.maxEntries ?? 20_000;
  const byRef = new WeakMemo<object, Entry>();
  const byHash = new Map<string, Entry>();
  // Not on the entries: an item measured but never tokenized would keep its whole JSON for as long
  // as the entry lives (20,000 entries of a long session's old outputs).
  const compactOf = new Map<Entry, string>();

  const entryOf = (item: unknown): Entry => {
    const isRef = typeof item === 'object' && item !== null;
    if (isRef) {
      const known = byRef.get(item);
      if (known !== undefined) return known;
    }
    const compact = canonicalJson(item, { compact: true });
    const hash = createHash('sha256').update(compact, 'utf8').digest('base64');
    let entry = byHash.get(hash);
    if (entry === undefined) {
      entry = { chars: serializedChars(item), hash };
      if (counter !== undefined) {
        compactOf.set(entry, compact);
        if (compactOf.size > COMPACT_KEPT) compactOf.delete(compactOf.keys().next().value as Entry);
      }
      byHash.set(hash, entry);
      if (byHash.size > maxEntries) {
        const oldest = byHash.keys().next();
        if (oldest.done !== true) byHash.delete(oldest.value);
      }
    }
    if (isRef) byRef.set(item, entry);
    return entry;
  };

  const tokensOf = (item: unknown): number | undefined => {
    if (counter === undefined) return undefined;
    const entry = entryOf(item);
    if (entry.tokens === undefined) {
      entry.tokens = counter.count(compactOf.get(entry) ?? canonicalJson(item, { compact: true }));
      compactOf.delete(entry);
    }
    return entry.tokens;
  };

  const otherValues = (request: Readonly<Record<string, unknown>>, listKey: string | undefined): [string, unknown][] =>
    Object.entries(request).filter(
      ([k, v]) => k !== listKey && v !== undefined && typeof v !== 'function' && typeof v !== 'symbol',
    );

  return {
    measure: entryOf,
    tokens: tokensOf,
    requestChars(request, listKey, items) {
      const entries: [string, number][] = otherValues(request, listKey).map(([k, v]) => [
        k,
        typeof v === 'object' && v !== null ? entryOf(v).chars : serializedChars(v),
      ]);
      if (listKey !== undefined) entries.push([listKey, serializedArrayChars(items.map((it) => entryOf(it).chars))]);
      return serializedObjectChars(entries);
    },
    requestTokens(request, listKey, items) {
      if (counter === undefined) return undefined;
      let total = 1;
      for (const [k, v] of otherValues(request, listKey)) total += (tokensOf(v) ?? 0) + counter.count(`"${k}":`);
      if (listKey !== undefined) for (const it of items) total += tokensOf(it) ?? 0;
      return total;
    },
    get size() {
      return byHash.size;
    },
  };
}

/** Code points of a string (re-exported for stages that size plain text). */
export { codePoints };
