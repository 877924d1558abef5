/**
 * The rules of one test runner, in its family's file (src/runners/<family>.ts): every stage that
 * reads runner output (the compactors, the digests, the family detector) reads them from there.
 */
export interface RunnerRules {
  /** Passing / progress noise: dropped and counted. */
  readonly noise: readonly RegExp[];
  /** Start of one failure's block (its excerpt is capped). */
  readonly block: RegExp;
  /** Summary lines, always kept. */
  readonly summary: RegExp;
  /**
   * A line that on its own shows a failure in this runner's output; every alternative anchored
   * with `^` (isFailureLine in src/compact/diagnostic-lines.ts joins them into one anchored test).
   */
  readonly failureLine: RegExp;
  /**
   * The same, as a failure record in a line-numbered view (a log or output read through a read
   * tool): any alternatives, anchored or not (isFailureLine joins them with the generic ones).
   */
  readonly recordFailure?: RegExp;
  /**
   * A line kept beside this runner's failure lines that proves nothing alone (a failing test's
   * header, the line it points at); every alternative anchored with `^`.
   */
  readonly context?: RegExp;
  /** Lines naming a failing test; group 1 is its id (tried in the order of src/runners/index.ts). */
  readonly failingIds: readonly RegExp[];
  /** True when a whole output is this runner's run though the command did not say so. */
  readonly showsRun?: (output: string) => boolean;
}

/** The start of an output, where runners print their banner. */
export const headOf = (output: string): string => output.slice(0, 20000);
/** The end of an output, where runners print their summary. */
export const tailOf = (output: string): string => output.slice(-4000);
