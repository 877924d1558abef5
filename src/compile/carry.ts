/**
 * The request stages' carried results: a request that extends the session's previous one (the
 * usual case, src/compile/prefix.ts) takes the previous request's per-output decisions for the
 * shared history and decides only what is new, or what a moved boundary may have changed. Every
 * carried path has a full path that computes the same result from scratch; the switch below turns
 * the carried paths off, so tests and benchmarks can compare the two.
 */

let enabled = true;

/** Whether the request stages may carry results from the session's previous request. */
export function carryEnabled(): boolean {
  return enabled;
}

/**
 * Switch the carried paths off (every request is planned from scratch) or on again; returns the
 * previous setting. For tests and benchmarks that compare the two paths; on by default.
 */
export function setCarry(on: boolean): boolean {
  const was = enabled;
  enabled = on;
  return was;
}

/** Process-wide counts of carried plans per stage (for tests and benchmarks). */
const counts = { duplicates: 0, history: 0, receipts: 0 };

/** Count one plan that carried the previous request's results. */
export function noteCarried(stage: keyof typeof counts): void {
  counts[stage]++;
}

/** A copy of the carried-plan counts so far. */
export function carryStats(): Readonly<typeof counts> {
  return { ...counts };
}
