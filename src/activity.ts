/**
 * Reductions in flight in this process. The event loop is shared: a vault's maintenance (indexing
 * queued content, checkpointing the WAL) that starts while a reduction awaits something runs inside
 * that reduction's time. The operator kit counts each asynchronous reduction here, and deferred
 * maintenance (src/vault/idle.ts) waits until none is in flight.
 */
let inFlight = 0;
let lastEnded = Number.NEGATIVE_INFINITY;

/**
 * Count one reduction as started; the returned function ends it (once, whatever the number of
 * calls).
 *
 * @example
 * const end = beginReduction();
 * try { await work(); } finally { end(); }
 */
export function beginReduction(now: () => number = performance.now.bind(performance)): () => void {
  inFlight++;
  let ended = false;
  return () => {
    if (ended) return;
    ended = true;
    inFlight--;
    lastEnded = now();
  };
}

/**
 * How many reductions are in flight, and when (performance.now ms) the last one ended.
 *
 * @example
 * if (reductionActivity().inFlight === 0) runMaintenance();
 */
export function reductionActivity(): { readonly inFlight: number; readonly lastEnded: number } {
  return { inFlight, lastEnded };
}
