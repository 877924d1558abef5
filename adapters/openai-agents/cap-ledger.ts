/**
 * Hands the output cap from the input filter (which compiles the request) to the Model wrapper
 * (which dispatches it). The SDK clones the filtered items before the model sees them, so the
 * two meet on a fingerprint of the item list (its length and its last item), not on identity.
 */
const MAX_ENTRIES = 64;

export class CapLedger {
  readonly #caps = new Map<string, number>();

  /** Remember the cap for the item list the filter returned. */
  record(items: readonly unknown[], cap: number | undefined): void {
    const key = fingerprint(items);
    if (key === undefined) return;
    this.#caps.delete(key);
    if (cap === undefined) return;
    this.#caps.set(key, cap);
    if (this.#caps.size > MAX_ENTRIES) this.#caps.delete(this.#caps.keys().next().value as string);
  }

  /** The cap recorded for this (cloned) item list, consumed on read. */
  take(items: unknown): number | undefined {
    if (!Array.isArray(items)) return undefined;
    const key = fingerprint(items);
    if (key === undefined) return undefined;
    const cap = this.#caps.get(key);
    this.#caps.delete(key);
    return cap;
  }
}

function fingerprint(items: readonly unknown[]): string | undefined {
  try {
    return `${items.length}\u0000${JSON.stringify(items.at(-1) ?? null)}`;
  } catch {
    return undefined;
  }
}
