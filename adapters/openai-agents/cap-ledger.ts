/**
 * Hands the output cap from the input filter (which compiles the request) to the Model wrapper
 * (which dispatches it). The SDK clones the filtered items before the model sees them, so the
 * two meet on a fingerprint of the item list (its length and its last item), not on identity.
 */
import { LRUCache } from 'lru-cache';

const MAX_ENTRIES = 64;

/** What the input filter hands to the Model wrapper for one filtered item list. */
export interface LedgerEntry {
  /** The output cap the compiled request carries, when the pipeline set one. */
  readonly cap: number | undefined;
  /** The run's session, for answering recovery calls in the Model wrapper. */
  readonly sessionId: string | undefined;
}

/**
 * A bounded map from the fingerprint of a filtered item list to its {@link LedgerEntry}: the input filter
 * records, the Model wrapper takes. The oldest entries are dropped past 64.
 *
 * @example
 * const ledger = new CapLedger();
 * const filter = createInputFilter(terminator, { resolveSession, ledger });
 */
export class CapLedger {
  // Least recently recorded first out; a read consumes the entry, so reads never reorder.
  readonly #entries = new LRUCache<string, LedgerEntry>({ max: MAX_ENTRIES });

  /** Remember the cap (and the session) for the item list the filter returned. */
  record(items: readonly unknown[], cap: number | undefined, sessionId?: string): void {
    const key = fingerprint(items);
    if (key === undefined) return;
    if (cap === undefined && sessionId === undefined) this.#entries.delete(key);
    else this.#entries.set(key, { cap, sessionId });
  }

  /** What was recorded for this (cloned) item list, consumed on read. */
  take(items: unknown): LedgerEntry | undefined {
    if (!Array.isArray(items)) return undefined;
    const key = fingerprint(items);
    if (key === undefined) return undefined;
    const entry = this.#entries.peek(key);
    this.#entries.delete(key);
    return entry;
  }
}

function fingerprint(items: readonly unknown[]): string | undefined {
  try {
    return `${items.length}\u0000${JSON.stringify(items.at(-1) ?? null)}`;
  } catch {
    return undefined;
  }
}
