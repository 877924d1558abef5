/**
 * Token counts shared through the vault's count store (src/vault/token-counts.ts), so a
 * conversation is tokenized once per store rather than once per process. A request with many items
 * this process has not seen for its session first asks the store for the counts of its large
 * items, by the hash of their compact canonical JSON, and the shared measurement memo takes them;
 * counts tokenized here are written back in batches after the calls. Only a counter with a
 * `countsKey` shares counts, and only items from {@link STORED_MIN_CHARS}. A failing store changes
 * nothing but speed.
 */
import type { ItemMeasures } from './item-measures.js';
import { listKeyOf } from '../model/prefix.js';
import type { ProviderRequest } from '../step.js';
import { BatchQueue } from '../batch-queue.js';
import type { CountStore } from '../vault/ports.js';

/** Items smaller than this (serializedChars) are tokenized, not looked up: ~0.2 ms of BPE against a row. */
export const STORED_MIN_CHARS = 1024;
/** A request with fewer items unseen by this process for its session asks the store nothing. */
export const UNSEEN_MIN = 8;
/** Counts written back wait this long for others (and for the telemetry that counts the same items). */
const WRITE_DELAY_MS = 100;

/** What a session remembers for the count store: how many of its items this process has measured. */
export interface SeenItems {
  seenItems: number;
}

/** The runtime's side of the count store. */
export interface SharedCounts {
  /** Before the request stages: the store's counts of the large items this process has not seen for `session`. Never rejects. */
  prefetch(request: ProviderRequest, session: SeenItems): Promise<void>;
  /** After a call: write the counts tokenized since, in a later batch. */
  written(): void;
  /** Writes what waits now; resolves once every count tokenized so far was written (or failed to be). */
  settled(): Promise<void>;
}

/** The store's shared counts for `measures`, or undefined when its counter shares none. */
export function sharedCounts(store: CountStore, measures: ItemMeasures): SharedCounts | undefined {
  const key = measures.counter?.countsKey;
  if (key === undefined || !measures.byContent) return undefined;
  const writes = new BatchQueue<null>(
    async () => {
      const rows = measures.takeCounted();
      if (rows.length > 0) await store.recordTokenCounts(key, rows);
    },
    { delayMs: WRITE_DELAY_MS },
  );
  return {
    async prefetch(request, session) {
      try {
        const listKey = listKeyOf(request);
        if (listKey === undefined) return;
        const list = request[listKey] as readonly unknown[];
        // Items of the session this process has measured: a request only longer by a few asks nothing.
        const from = Math.min(session.seenItems, list.length);
        session.seenItems = list.length;
        if (list.length - from < UNSEEN_MIN) return;
        const wanted: string[] = [];
        for (let i = from; i < list.length; i++) {
          const entry = measures.entry(list[i]);
          if (entry.compact === undefined && entry.hash !== '' && entry.chars >= STORED_MIN_CHARS)
            wanted.push(entry.hash);
        }
        if (wanted.length === 0) return;
        for (const [hash, counts] of await store.tokenCounts(key, wanted)) measures.absorb(hash, counts);
      } catch {
        // Nothing shared: the stages tokenize as they would have.
      }
    },
    written: () => writes.add(null),
    settled: () => writes.settled(),
  };
}
