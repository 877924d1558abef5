/**
 * Which conversation an item belongs to (docs/fidelity.md: a session id may be reused by a new
 * conversation): decisions about an item are keyed by the chain hash of every item up to and
 * including it. The memo remembers, per key, how many earlier requests showed the item inline and
 * whether a history rewrite replaced it, mirrored in the vault (`setRendering`), so a new process
 * (or an evicted session lane) renders the history as the previous one did.
 */
import { createHash } from 'node:crypto';
import type { SessionStore, StoreScope } from '../vault/ports.js';
import { isRecognisedList, sharedLead, type RecognisedLists } from '../model/prefix.js';

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
      const lead = sharedLead(items, lastItems, lists);
      const added: string[] = [];
      let prev = lead > 0 ? lastHashes[lead - 1]! : '';
      for (let i = lead; i < items.length; i++) {
        prev = createHash('sha256')
          .update(prev)
          .update('\u0000')
          .update(itemHash(items[i]))
          .digest('base64url')
          .slice(0, 32);
        added.push(prev);
      }
      // One copy of the shared hashes, at its final length (the returned lists are never changed).
      const out = (lead === lastHashes.length ? lastHashes : lastHashes.slice(0, lead)).concat(added);
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

/** Set `key` in a bounded map, dropping the least recently added key past the bound. */
function remember<V>(map: Map<string, V>, key: string, value: V): void {
  map.set(key, value);
  if (map.size > MEMO_KEYS) map.delete(map.keys().next().value as string);
}

type ShownEntry = { count: number; last: string };
type Row = readonly [key: string, value: string];

/** One session's conversation memo. */
interface MemoState {
  readonly vault: SessionStore;
  readonly sessionId: string;
  readonly cap: number;
  readonly shown: Map<string, ShownEntry>;
  readonly rewritten: Map<string, string | null>;
}

async function loadShown(s: MemoState, key: string): Promise<ShownEntry> {
  let entry = s.shown.get(key);
  if (entry === undefined) {
    const stored = await s.vault.getRendering(s.sessionId, SHOWN + key).catch(() => undefined);
    const [count, last] =
      stored === undefined ? [0, ''] : [Number(stored.split(' ')[0]) || 0, stored.split(' ')[1] ?? ''];
    entry = { count, last };
    remember(s.shown, key, entry);
  }
  return entry;
}

function before(entry: ShownEntry, requestKey: string): number {
  return entry.count - (entry.last === requestKey ? 1 : 0);
}

/** Remember what a history rewrite gave the item; the row that mirrors it. */
function rewrite(s: MemoState, key: string, kind: string): Row {
  remember(s.rewritten, key, kind);
  return [REWRITTEN + key, kind];
}

/** Count the request in the item's entry; the row that mirrors it, or undefined when nothing changed. */
function shownRow(s: MemoState, entry: ShownEntry, key: string, requestKey: string): Row | undefined {
  if (entry.count >= s.cap || entry.last === requestKey) return undefined;
  entry.count++;
  entry.last = requestKey;
  return [SHOWN + key, `${entry.count} ${requestKey}`];
}

// The vault mirror serves restarts only: a failed write costs a cache hit later, never fidelity.
function mirrored(write: Promise<void>): Promise<void> {
  return write.catch(() => undefined);
}

function markOne(
  s: MemoState,
  entry: ShownEntry,
  key: string,
  requestKey: string,
  scope: StoreScope | undefined,
): Promise<void> | undefined {
  const row = shownRow(s, entry, key, requestKey);
  return row === undefined ? undefined : mirrored(s.vault.setRendering(s.sessionId, ...row, scope));
}

function markAll(
  s: MemoState,
  rewrites: readonly { readonly key: string; readonly kind: string }[],
  entries: readonly (readonly [string, ShownEntry])[],
  requestKey: string,
  scope: StoreScope | undefined,
): Promise<void> | undefined {
  const writes = rewrites.map(({ key, kind }) => rewrite(s, key, kind));
  for (const [key, entry] of entries) {
    const row = shownRow(s, entry, key, requestKey);
    if (row !== undefined) writes.push(row);
  }
  if (writes.length === 0) return undefined;
  return mirrored(s.vault.setRenderings(s.sessionId, writes, scope));
}

function markRequest(
  s: MemoState,
  requestKey: string,
  marks: RequestMarks,
  scope: StoreScope | undefined,
): Promise<void> | undefined {
  const rewrites = marks.rewritten ?? [];
  // Entries are taken up front, so a key given twice counts the request once (as in order).
  const known = marks.shown.map((key) => [key, s.shown.get(key)] as const);
  if (known.every(([, entry]) => entry !== undefined))
    return markAll(s, rewrites, known as (readonly [string, ShownEntry])[], requestKey, scope);
  return (async () => {
    const loaded = new Map<string, ShownEntry>();
    const entries: (readonly [string, ShownEntry])[] = [];
    for (const [key, entry] of known) {
      const e = entry ?? loaded.get(key) ?? (await loadShown(s, key));
      loaded.set(key, e);
      entries.push([key, e]);
    }
    await markAll(s, rewrites, entries, requestKey, scope);
  })();
}

async function loadRewritten(s: MemoState, key: string): Promise<string | undefined> {
  const kind = (await s.vault.getRendering(s.sessionId, REWRITTEN + key).catch(() => undefined)) ?? null;
  remember(s.rewritten, key, kind);
  return kind ?? undefined;
}

/** `cap`: stop counting (and writing) once an item was shown this many times. */
export function createConversationMemo(vault: SessionStore, sessionId: string, cap: number): ConversationMemo {
  const s: MemoState = {
    vault,
    sessionId,
    cap,
    shown: new Map(),
    rewritten: new Map(),
  };
  return {
    shownBefore(key, requestKey) {
      const entry = s.shown.get(key);
      return entry !== undefined ? before(entry, requestKey) : loadShown(s, key).then((e) => before(e, requestKey));
    },
    markShown(key, requestKey, scope) {
      const entry = s.shown.get(key);
      return entry !== undefined
        ? markOne(s, entry, key, requestKey, scope)
        : loadShown(s, key).then((e) => markOne(s, e, key, requestKey, scope));
    },
    markRequest: (requestKey, marks, scope) => markRequest(s, requestKey, marks, scope),
    rewritten(key) {
      const kind = s.rewritten.get(key);
      return kind === undefined ? loadRewritten(s, key) : (kind ?? undefined);
    },
    async markRewritten(key, kind, scope) {
      await mirrored(vault.setRendering(sessionId, ...rewrite(s, key, kind), scope));
    },
  };
}
