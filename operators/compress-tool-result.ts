/**
 * `compressToolResult`: large search_files / process results (and read_file in aggressive mode)
 * compacted natively, terminal results through the built-in per-family compactors (a plain file read such as `cat f` only in aggressive mode, as read_file). The exact
 * original is vaulted, read back and pinned before the compact text + recovery note replaces it.
 * What it would show is planned in src/compact/compression-plan.ts (shared with deltaRepeatedOutput).
 */
import { STAGES } from '../src/stages.js';
import type { OperatorFunction } from 'rxjs';
import { excerptLargeOutput } from '../src/compact/large-output.js';
import { codePointLength } from '../src/compact/lines.js';
import { strictlySmaller } from '../src/accept.js';
import { preparedFor } from '../src/compact/prepared.js';
import { memoCounter, pinDelivered, putContent, vaultToolResult } from '../src/compact/receipt.js';
import {
  compressionPlanner,
  planOutput,
  type CompressToolResultOptions,
  type PlannedView,
} from '../src/compact/compression-plan.js';
import { renderToolView, type ViewInput } from '../src/compact/tool-view.js';
import { stepOperator } from '../src/operator-kit.js';
import { advance, note, storeScope, type Step, type ToolResult } from '../src/step.js';

export {
  compressionPlanner,
  planOutput,
  type CompressToolResultOptions,
  type CompressionPlan,
  type CompressionPlanner,
  type PlannedView,
} from '../src/compact/compression-plan.js';

const STAGE = STAGES.compressToolResult;

/**
 * Replace each large tool result with a smaller faithful view plus a recovery note, after the exact
 * original is vaulted and read back; any other result, or any failure, passes through unchanged.
 *
 * @example
 * results$.pipe(compressToolResult({ vault, counter: createTiktokenCounter() }))
 */
export function compressToolResult(
  options: CompressToolResultOptions,
): OperatorFunction<Step<ToolResult>, Step<ToolResult>> {
  const planner = compressionPlanner(options);
  const { vault } = options;
  const { view, maxArtifactChars } = planner;

  return stepOperator<ToolResult>(STAGE, () => async (step, signal) => {
    const result = step.value;
    // What an earlier stage of this pass (a skipped delta) already vaulted and rendered.
    const shared = preparedFor(step, vault);
    const known = shared?.views.get(options) as PlannedView | undefined;
    shared?.views.delete(options); // used once: a Step the host keeps does not keep the view alive
    const { plan, counter } = known ?? (await planner.plan(step, signal, memoCounter(options.counter)));
    if (plan === undefined) return undefined;
    if (plan.kind === 'over_ceiling') return overCeiling(step, plan.input, plan.tool, plan.rawChars, signal);
    if (plan.kind === 'not_smaller') return note(step, { stage: STAGE, kind: 'skipped', reason: 'not_smaller' });
    const raw = result.content;
    signal.throwIfAborted(); // nothing is written after an abort
    const scope = storeScope(step.context);
    const put = shared?.put ?? (await vaultToolResult(vault, result, step.context));
    const output = planOutput(plan, put.artifactId);
    if (!strictlySmaller(raw, output, counter))
      return note(step, { stage: STAGE, kind: 'skipped', reason: 'not_smaller' });
    // The note is about to be delivered: retention must never prune what it names.
    signal.throwIfAborted();
    // Our own put of `raw` is compared with the row; a put another stage shared is hashed.
    await pinDelivered(vault, [put.artifactId], scope, shared?.put === undefined ? putContent(put, raw) : undefined);
    const savedTokens = counter === undefined ? {} : { savedTokens: counter.count(raw) - counter.count(output) };
    return advance(
      step,
      { ...result, content: output },
      {
        stage: STAGE,
        kind: 'applied',
        reason: plan.tool === 'terminal' ? 'terminal_compacted' : 'native_compacted',
        savedChars: plan.rawChars - codePointLength(output),
        ...savedTokens,
        artifacts: [put.artifactId],
      },
    );
  });

  /** A bounded view of an output that cannot be stored, saying so; read in slices, never counted whole. */
  async function overCeiling(
    step: Step<ToolResult>,
    input: ViewInput,
    tool: string,
    rawChars: number,
    signal: AbortSignal,
  ): Promise<Step<ToolResult>> {
    // Beyond 4× the ceiling only the head and tail are read: the work stays bounded.
    const excerpt = await excerptLargeOutput(input.output, { signal, scanMiddle: rawChars <= 4 * maxArtifactChars });
    const what = excerpt.middleScanned
      ? 'its first and last lines and the diagnostic lines between them'
      : 'its first and last lines';
    const head =
      `[Token Terminator: this output is ${fmt(rawChars)} chars, over the ${fmt(maxArtifactChars)}-char artifact ceiling ` +
      `(TOKEN_TERMINATOR_MAX_ARTIFACT_CHARS): it was not stored and cannot be recovered. Shown: a compact view of ${what}. ` +
      'Counts in it cover the shown parts only. Re-run the command with narrower output (grep, head, tail) to see the rest.]';
    const output = `${head}\n${renderToolView({ ...input, output: excerpt.text }, { ...view, tool }).trimEnd()}`;
    return advance(
      step,
      { ...step.value, content: output },
      { stage: STAGE, kind: 'applied', reason: 'over_ceiling', savedChars: rawChars - codePointLength(output) },
    );
  }
}

const fmt = (n: number): string => n.toLocaleString('en-US');
