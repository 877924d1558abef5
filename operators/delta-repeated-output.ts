/** `deltaRepeatedOutput`: the tool-result stage (operators/reduce-tool-result.ts) with its delta candidate only. */
import type { StageOperator } from '../src/operator-kit.js';
import { compressionPlanner, type CompressToolResultOptions } from '../src/compact/compression-plan.js';
import type { TokenCounter } from '../src/measure/types.js';
import type { ToolResult } from '../src/step.js';
import { deltaParts, type DeltaCandidateOptions } from '../src/compact/tool-result-stage.js';
import { toolResultStage } from './reduce-tool-result.js';

/** Options of {@link deltaRepeatedOutput}; only `vault` is required. */
export interface DeltaRepeatedOutputOptions extends DeltaCandidateOptions {
  /** Exact token counter: a delta must also use fewer tokens. @defaultValue none (characters only) */
  readonly counter?: TokenCounter;
  /**
   * The options of the compact view the delta must beat (what compressToolResult would show instead);
   * without it the bar is the terminal compaction at `compactMaxChars`. To show that view too, use
   * reduceToolResult, which vaults the exact text once for both. @defaultValue none
   */
  readonly compression?: CompressToolResultOptions;
}

/**
 * Turn a terminal output that repeats an earlier run of the same command into a unified diff
 * against that run, when the diff is strictly smaller than both the raw output and its compact
 * rendering; the exact output is vaulted first and always becomes the new baseline.
 *
 * @example
 * results$.pipe(deltaRepeatedOutput({ vault }))
 */
export function deltaRepeatedOutput(options: DeltaRepeatedOutputOptions): StageOperator<ToolResult> {
  const delta = deltaParts('deltaRepeatedOutput', options);
  const planner = options.compression === undefined ? undefined : compressionPlanner(options.compression);
  return toolResultStage({
    delta,
    ...(planner === undefined ? {} : { planner }),
    compact: false,
    counter: options.counter,
  });
}
