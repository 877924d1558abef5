/**
 * `compressToolResult`: the tool-result stage (operators/reduce-tool-result.ts) with its compact
 * candidate only. Large search_files / process results (and read_file in aggressive mode) are
 * compacted natively, terminal results through the built-in per-family compactors (a plain file
 * read such as `cat f` only in aggressive mode, as read_file). The exact original is vaulted, read
 * back and pinned before the compact text + recovery note replaces it. What it would show is
 * planned in src/compact/compression-plan.ts.
 */
import type { StageOperator } from '../src/operator-kit.js';
import { compressionPlanner, type CompressToolResultOptions } from '../src/compact/compression-plan.js';
import type { ToolResult } from '../src/step.js';
import { toolResultStage } from './reduce-tool-result.js';

export {
  compressionPlanner,
  planOutput,
  type CompressToolResultOptions,
  type CompressionPlan,
  type CompressionPlanner,
  type PlannedView,
} from '../src/compact/compression-plan.js';

/**
 * Replace each large tool result with a smaller faithful view plus a recovery note, after the exact
 * original is vaulted and read back; any other result, or any failure, passes through unchanged.
 *
 * @example
 * results$.pipe(compressToolResult({ vault, counter: createTiktokenCounter() }))
 */
export function compressToolResult(options: CompressToolResultOptions): StageOperator<ToolResult> {
  return toolResultStage({ planner: compressionPlanner(options), compact: true, counter: options.counter });
}
