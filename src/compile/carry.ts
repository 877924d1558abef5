/**
 * The request stages' carried results: a request that extends the session's previous one (the
 * usual case, src/compile/prefix.ts) takes the previous request's per-output decisions for the
 * shared history and decides only what is new, or what a moved boundary may have changed. Every
 * carried path has a full path that computes the same result from scratch; the options below turn
 * the carried paths off per operator (or per Terminator), so tests and benchmarks can compare the two.
 */

/** The stages that carry results from a session's previous request. */
export type CarriedStage = 'duplicates' | 'history' | 'receipts';

/** How a request operator carries results from a session's previous request; every field is optional. */
export interface CarryOptions {
  /**
   * Carry the previous request's per-output decisions; false plans every request from scratch
   * (the same output, computed again; for tests and benchmarks that compare the two paths).
   *
   * @defaultValue `true`
   */
  readonly carry?: boolean;
  /**
   * Called once per plan that carried the previous request's results, with its stage (tests and
   * benchmarks check that the carried paths ran).
   *
   * @defaultValue none
   */
  readonly onCarried?: (stage: CarriedStage) => void;
}

/** The carry options set in `options` (absent ones left out, for exactOptionalPropertyTypes). */
export function carryOf(options: CarryOptions): CarryOptions {
  return {
    ...(options.carry === undefined ? {} : { carry: options.carry }),
    ...(options.onCarried === undefined ? {} : { onCarried: options.onCarried }),
  };
}
