/**
 * `reduceToolResult`: the one tool-result stage. For each result: check the size; vault the exact
 * text once; build two candidates, a delta against the baseline of the same terminal command
 * (deltaRepeatedOutput's decision) and the compact view with its recovery note
 * (compressToolResult's decision); show the smallest one strictly smaller than the raw output (the
 * delta only when it also beats the view); advance the baseline and pin what is shown with its
 * known content (compared with the stored row, never hashed again).
 *
 * `deltaRepeatedOutput` and `compressToolResult` are this stage with one candidate each.
 */
import {
  compressionPlanner,
  type CompressionPlanner,
  type CompressToolResultOptions,
} from '../src/compact/compression-plan.js';
import { memoCounter } from '../src/compact/receipt.js';
import {
  compactCandidate,
  deltaCandidate,
  deltaParts,
  type DeltaCandidateOptions,
  type DeltaOutcome,
  type DeltaParts,
  type DeltaVault,
} from '../src/compact/tool-result-stage.js';
import { stepOperator, type StageOperator } from '../src/operator-kit.js';
import { STAGES } from '../src/stages.js';
import { failOpen, type Step, type ToolResult } from '../src/step.js';
import { resolveFlags } from '../src/tools/modes.js';

const DELTA = STAGES.deltaRepeatedOutput;
const COMPRESS = STAGES.compressToolResult;

/** Options of {@link reduceToolResult}: the compact view's and the delta's; only `vault` is required. */
export interface ReduceToolResultOptions
  extends CompressToolResultOptions, Omit<DeltaCandidateOptions, 'vault' | 'compactMaxChars' | 'minChars'> {
  readonly vault: DeltaVault;
  /** Smaller terminal outputs get no delta candidate (≥ 1). @defaultValue `2000` (config `temporalMinChars`) */
  readonly temporalMinChars?: number;
}

/** What one result's stage builds: its candidates and the view the delta must beat. */
export interface StageParts {
  /** The delta candidate (off when undefined). */
  readonly delta?: DeltaParts;
  /** The compact view: the delta's bar, and a candidate itself when `compact`. */
  readonly planner?: CompressionPlanner;
  /** Whether the compact view is shown (else it is only the bar the delta must beat). */
  readonly compact: boolean;
  /** The counter of the acceptance gates. */
  readonly counter: CompressToolResultOptions['counter'];
}

/**
 * Reduce each tool result with the smallest of its candidates (a delta against the same command's
 * previous output, the compact view) that is strictly smaller than the raw output, after its exact
 * text is vaulted once; any other result, or any failure, passes through unchanged.
 *
 * @example
 * results$.pipe(reduceToolResult({ vault, counter: createTiktokenCounter() }))
 */
export function reduceToolResult(options: ReduceToolResultOptions): StageOperator<ToolResult> {
  const { temporalMinChars, ...rest } = options;
  const delta = deltaParts(
    'reduceToolResult',
    temporalMinChars === undefined ? rest : { ...rest, minChars: temporalMinChars },
  );
  const planner = compressionPlanner(options);
  // The mode decides the candidates: without native compaction the delta beats its own compaction.
  const native = resolveFlags('reduceToolResult', options).native;
  return toolResultStage({
    ...(delta.flags.temporal ? { delta } : {}),
    ...(native ? { planner } : {}),
    compact: native,
    counter: options.counter,
  });
}

/** The stage over `parts` (see the module comment). */
export function toolResultStage(parts: StageParts): StageOperator<ToolResult> {
  const { delta, planner } = parts;
  return stepOperator<ToolResult>(parts.compact ? COMPRESS : DELTA, () => async (step, signal) => {
    const counter = memoCounter(parts.counter);
    let skipped: Exclude<DeltaOutcome, { readonly done: Step<ToolResult> }> | undefined;
    if (delta !== undefined) {
      let outcome: DeltaOutcome | undefined;
      try {
        outcome = await deltaCandidate(delta, planner, step, signal, counter, parts.counter);
      } catch (error) {
        if (signal.aborted) throw error;
        outcome = { step: failOpen(step, DELTA, error) };
      }
      if (outcome !== undefined && 'done' in outcome) return outcome.done;
      skipped = outcome;
      if (signal.aborted) return skipped?.step;
    }
    if (!parts.compact || planner === undefined) return skipped?.step;
    const current = skipped?.step ?? step;
    try {
      const planned = skipped?.planned ?? (await planner.plan(current, signal, counter));
      return (await compactCandidate(planner, current, signal, planned, skipped?.put)) ?? skipped?.step;
    } catch (error) {
      if (signal.aborted) throw error;
      return failOpen(current, COMPRESS, error);
    }
  });
}
