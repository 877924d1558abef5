/**
 * Which conversation an item belongs to. A session id may be reused by a new conversation (a
 * restarted task, a second chat under the same key), so decisions about an item are keyed by its
 * position in *this* conversation: the chain hash of every item up to and including it. Two
 * requests agree on an item's key exactly when they agree on the whole history up to that item.
 *
 * The memo remembers, per key, how many earlier requests showed the item inline and whether a
 * history rewrite replaced it; both are mirrored in the vault (`setRendering`), so a new process
 * (or an evicted session lane) renders the history as the previous one did.
 */
import { createHash } from 'node:crypto';
import type { SessionStore, StoreScope } from '../vault/ports.js';
import { isRecognisedList, sharedLead, type RecognisedLists } from './prefix.js';

/** Chain hashes of a list of items, reusing the previous list's hashes for a shared leading run. */
export interface ChainMemo {
  hashes(items: readonly unknown[], itemHash: (item: unknown) => string): readonly string[];
}

/** A chain memo; `lists` (the session's request memo's) tell how much of the previous list a new one shares. */
export function createChainMemo(lists?: RecognisedLists): ChainMemo {
  let lastItems: readonly unknown[] = [];
  let lastHashes: string[] = [];
  return {
    hashes(items, itemHash) {
      let i = sharedLead(items, lastItems, lists);
      const out = lastHashes.slice(0, i);
      let prev = i > 0 ? out[i - 1]! : '';
      for (; i < items.length; i++) {
        prev = createHash('sha256')
          .update(prev)
          .update('\u0000')
          .update(itemHash(items[i]))
          .digest('base64url')
          .slice(0, 32);
        out.push(prev);
      }
      // A recognised list is never changed; a caller's own array may be, in place, before the next call.
      lastItems = isRecognisedList(items, lists) ? items : items.slice();
      lastHashes = out;
      return out;
    },
  };
}

const SHOWN = 'tt:shown:';
const REWRITTEN = 'tt:rewritten:';

/**
 * Per-session decisions about items, by chain key. What is known already is answered without a
 * promise (a request names every item of its history: no microtask per item); `await` takes both.
 */
export interface ConversationMemo {
  /** Distinct requests other than `requestKey` that showed the item inline (capped at the lease count). */
  shownBefore(key: string, requestKey: string): number | Promise<number>;
  /**
   * Record that the request `requestKey` showed the item inline (`scope`: the request's tenant and
   * lock budget); undefined when there was nothing to record.
   */
  markShown(key: string, requestKey: string, scope?: StoreScope): Promise<void> | undefined;
  /**
   * What one request decided, with what changed written to the vault in one transaction: the same
   * as {@link markRewritten} for each of `marks.rewritten`, then {@link markShown} for each of
   * `marks.shown`, in order. Undefined when there was nothing to record.
   */
  markRequest(requestKey: string, marks: RequestMarks, scope?: StoreScope): Promise<void> | undefined;
  /** The rendering a history rewrite gave the item (its kind), if any. */
  rewritten(key: string): string | undefined | Promise<string | undefined>;
  markRewritten(key: string, kind: string, scope?: StoreScope): Promise<void>;
  /**
   * Moves on whenever an earlier answer of {@link rewritten} or {@link shownBefore} may change
   * other than by counting a request or recording a rewrite: a key dropped from memory (the
   * mirror answers for it again, possibly without a write that failed). A planner carries earlier
   * answers only while this stays the same.
   */
  readonly epoch: number;
  /** Rewrites recorded so far (a mark for {@link rewrittenSince}). */
  readonly rewriteMark: number;
  /** Keys whose rewrite was recorded after `mark`, in order; undefined when the memo no longer knows them all. */
  rewrittenSince(mark: number): readonly string[] | undefined;
  /**
   * Whether `requestKey` may be some item's last counted showing (counted here, or read back from
   * the mirror); false only when it certainly is none. While it is false and the epoch stays, an
   * item shown the lease count of times keeps the same {@link shownBefore} answer.
   */
  counted(requestKey: string): boolean;
}

/** What {@link ConversationMemo.markRequest} records. */
export interface RequestMarks {
  /** Keys of the items the request showed inline. */
  readonly shown: readonly string[];
  /** Items a history rewrite replaced, with the kind it gave them. */
  readonly rewritten?: readonly { readonly key: string; readonly kind: string }[];
}

/**
 * Keys kept in memory per session (least recently added dropped; the vault mirror still answers
 * for them). A host that keeps a sliding window re-keys every item on every request (the chain
 * changes at its start), so without a bound a long session would hold every key it ever saw.
 */
const MEMO_KEYS = 4096;

/** Set `key` in a bounded map; true when that dropped the least recently added key. */
function remember<V>(map: Map<string, V>, key: string, value: V): boolean {
  map.set(key, value);
  if (map.size <= MEMO_KEYS) return false;
  map.delete(map.keys().next().value as string);
  return true;
}

/** `cap`: stop counting (and writing) once an item was shown this many times. */
export function createConversationMemo(vault: SessionStore, sessionId: string, cap: number): ConversationMemo {
  const shown = new Map<string, { count: number; last: string }>();
  const rewritten = new Map<string, string | null>();
  let epoch = 0;
  // The keys of the latest rewrites: log[j] is rewrite number logStart + j.
  let rewrites = 0;
  let logStart = 0;
  let log: string[] = [];
  // Request keys entries were last counted with; past the bound every key may be one (forgot).
  const lasts = new Set<string>();
  let forgot = false;
  const noteLast = (requestKey: string): void => {
    if (forgot) return;
    lasts.add(requestKey);
    if (lasts.size > MEMO_KEYS) {
      forgot = true;
      lasts.clear();
    }
  };
  const loadShown = async (key: string): Promise<{ count: number; last: string }> => {
    let entry = shown.get(key);
    if (entry === undefined) {
      const stored = await vault.getRendering(sessionId, SHOWN + key).catch(() => undefined);
      const [count, last] =
        stored === undefined ? [0, ''] : [Number(stored.split(' ')[0]) || 0, stored.split(' ')[1] ?? ''];
      entry = { count, last };
      noteLast(last);
      if (remember(shown, key, entry)) epoch++;
    }
    return entry;
  };
  const before = (entry: { count: number; last: string }, requestKey: string): number =>
    entry.count - (entry.last === requestKey ? 1 : 0);
  /** Count the request in the entry; the value to mirror, or undefined when nothing changed. */
  const count = (entry: { count: number; last: string }, requestKey: string): string | undefined => {
    if (entry.count >= cap || entry.last === requestKey) return undefined;
    entry.count++;
    entry.last = requestKey;
    noteLast(requestKey);
    return `${entry.count} ${requestKey}`;
  };
  type Row = readonly [key: string, value: string];
  /** Remember what a history rewrite gave the item; the row that mirrors it. */
  const rewrite = (key: string, kind: string): Row => {
    if (remember(rewritten, key, kind)) epoch++;
    rewrites++;
    log.push(key);
    if (log.length > MEMO_KEYS) {
      log = log.slice(Math.floor(log.length / 2));
      logStart = rewrites - log.length;
    }
    return [REWRITTEN + key, kind];
  };
  /** Count the request in the item's entry; the row that mirrors it, or undefined when nothing changed. */
  const shownRow = (entry: { count: number; last: string }, key: string, requestKey: string): Row | undefined => {
    const value = count(entry, requestKey);
    return value === undefined ? undefined : [SHOWN + key, value];
  };
  // The vault mirror serves restarts only: a failed write costs a cache hit later, never fidelity.
  const mirrored = (write: Promise<void>): Promise<void> => write.catch(() => undefined);
  const mark = (
    entry: { count: number; last: string },
    key: string,
    requestKey: string,
    scope: StoreScope | undefined,
  ): Promise<void> | undefined => {
    const row = shownRow(entry, key, requestKey);
    return row === undefined ? undefined : mirrored(vault.setRendering(sessionId, ...row, scope));
  };
  const markAll = (
    rewrites: readonly { readonly key: string; readonly kind: string }[],
    entries: readonly (readonly [string, { count: number; last: string }])[],
    requestKey: string,
    scope: StoreScope | undefined,
  ): Promise<void> | undefined => {
    const writes = rewrites.map(({ key, kind }) => rewrite(key, kind));
    for (const [key, entry] of entries) {
      const row = shownRow(entry, key, requestKey);
      if (row !== undefined) writes.push(row);
    }
    if (writes.length === 0) return undefined;
    return mirrored(vault.setRenderings(sessionId, writes, scope));
  };
  const loadRewritten = async (key: string): Promise<string | undefined> => {
    const kind = (await vault.getRendering(sessionId, REWRITTEN + key).catch(() => undefined)) ?? null;
    if (remember(rewritten, key, kind)) epoch++;
    return kind ?? undefined;
  };
  return {
    shownBefore(key, requestKey) {
      const entry = shown.get(key);
      return entry !== undefined ? before(entry, requestKey) : loadShown(key).then((e) => before(e, requestKey));
    },
    markShown(key, requestKey, scope) {
      const entry = shown.get(key);
      return entry !== undefined
        ? mark(entry, key, requestKey, scope)
        : loadShown(key).then((e) => mark(e, key, requestKey, scope));
    },
    markRequest(requestKey, marks, scope) {
      const rewrites = marks.rewritten ?? [];
      // Entries are taken up front, so a key given twice counts the request once (as in order).
      const known = marks.shown.map((key) => [key, shown.get(key)] as const);
      if (known.every(([, entry]) => entry !== undefined))
        return markAll(rewrites, known as (readonly [string, { count: number; last: string }])[], requestKey, scope);
      return (async () => {
        const loaded = new Map<string, { count: number; last: string }>();
        const entries: (readonly [string, { count: number; last: string }])[] = [];
        for (const [key, entry] of known) {
          const e = entry ?? loaded.get(key) ?? (await loadShown(key));
          loaded.set(key, e);
          entries.push([key, e]);
        }
        await markAll(rewrites, entries, requestKey, scope);
      })();
    },
    rewritten(key) {
      const kind = rewritten.get(key);
      return kind === undefined ? loadRewritten(key) : (kind ?? undefined);
    },
    async markRewritten(key, kind, scope) {
      await mirrored(vault.setRendering(sessionId, ...rewrite(key, kind), scope));
    },
    get epoch() {
      return epoch;
    },
    get rewriteMark() {
      return rewrites;
    },
    rewrittenSince: (mark) => (mark < logStart || mark > rewrites ? undefined : log.slice(mark - logStart)),
    counted: (requestKey) => forgot || lasts.has(requestKey),
  };
}
