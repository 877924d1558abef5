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
import { strictlySmaller } from '../src/accept.js';
import {
  compressionPlanner,
  isRendering,
  planOutput,
  type CompressionPlanner,
  type CompressToolResultOptions,
  type PlannedView,
} from '../src/compact/compression-plan.js';
import { excerptLargeOutput } from '../src/compact/large-output.js';
import { codePointLength } from '../src/compact/lines.js';
import { memoCounter, pinDelivered, putContent, vaultToolResult, type MemoCounter } from '../src/compact/receipt.js';
import { COUNT_SLICE_CHARS, countInSlices, SLICE_CHARS, yieldSlice } from '../src/compact/slices.js';
import {
  baselineKey,
  compressionBar,
  deltaText,
  deltaViewKey,
  encodeDeltaView,
  ownBar,
} from '../src/compact/temporal-delta.js';
import { renderToolView, type ViewInput } from '../src/compact/tool-view.js';
import { defaultInt, type ModeFlags } from '../src/config/index.js';
import type { Mode } from '../src/config/types.js';
import { intOption, oneOfOption, requireVault } from '../src/options.js';
import { stepOperator, type StageOperator } from '../src/operator-kit.js';
import { STAGES } from '../src/stages.js';
import { advance, failOpen, note, storeScope, type Step, type ToolResult } from '../src/step.js';
import { commandOf } from '../src/tools/command.js';
import { resolveFlags } from '../src/tools/modes.js';
import { canonicalToolName, validateToolNames } from '../src/tools/names.js';
import type { ArtifactStore, LeaseStore, SessionStore } from '../src/vault/ports.js';
import { scopedReads } from '../src/vault/scoped-reads.js';
import type { PutResult } from '../src/vault/types.js';
import type { Digests } from '../src/ledger/digests.js';

const DELTA = STAGES.deltaRepeatedOutput;
const COMPRESS = STAGES.compressToolResult;

/** The vault the delta candidate needs: exact outputs, baselines and the delta's first view. */
export type DeltaVault = ArtifactStore &
  LeaseStore &
  Pick<SessionStore, 'getBaseline' | 'setBaseline' | 'setRendering'>;

/** Options of the delta candidate (deltaRepeatedOutput's own); the shared ones mean what they mean for the compact view. */
export interface DeltaCandidateOptions extends Pick<
  CompressToolResultOptions,
  'toolNames' | 'maxArtifactChars' | 'env' | 'digests'
> {
  /** Where exact outputs and baselines live (required). */
  readonly vault: DeltaVault;
  /** Mode gate (on in balanced and aggressive); ignored when `flags` is given. @defaultValue `'balanced'` */
  readonly mode?: Mode;
  /** Mode flags computed from the config; `flags.temporal` gates the delta. @defaultValue the flags of `mode` */
  readonly flags?: ModeFlags;
  /** Baselines per session (`session`) or shared across sessions (`workspace`). @defaultValue `'session'` */
  readonly scope?: 'session' | 'workspace';
  /** Smaller outputs get no delta (≥ 1). @defaultValue `2000` (config `temporalMinChars`) */
  readonly minChars?: number;
  /** Size target of the compact rendering a delta must beat when there is no compact candidate. @defaultValue `4000` */
  readonly compactMaxChars?: number;
}

/** Options of {@link reduceToolResult}: the compact view's and the delta's; only `vault` is required. */
export interface ReduceToolResultOptions
  extends CompressToolResultOptions, Omit<DeltaCandidateOptions, 'vault' | 'compactMaxChars' | 'minChars'> {
  readonly vault: DeltaVault;
  /** Smaller terminal outputs get no delta candidate (≥ 1). @defaultValue `2000` (config `temporalMinChars`) */
  readonly temporalMinChars?: number;
}

/** The delta candidate, validated once. */
interface DeltaParts {
  readonly vault: DeltaVault;
  readonly flags: ModeFlags;
  readonly toolNames: Readonly<Record<string, string>> | undefined;
  readonly scope: 'session' | 'workspace';
  readonly minChars: number;
  readonly maxArtifactChars: number;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly compactMaxChars: number | undefined;
  readonly digests: Digests | undefined;
}

/** The delta candidate's parts from its options (`name`: the operator the options were given to). */
export function deltaParts(name: string, options: DeltaCandidateOptions): DeltaParts {
  requireVault(name, options);
  return {
    vault: options.vault,
    flags: resolveFlags(name, options),
    toolNames: validateToolNames(name, options.toolNames),
    scope: oneOfOption(name, 'scope', options.scope, 'session', ['session', 'workspace']),
    minChars: intOption(name, 'minChars', options.minChars, defaultInt('temporalMinChars'), 1),
    maxArtifactChars: intOption(name, 'maxArtifactChars', options.maxArtifactChars, defaultInt('maxArtifactChars'), 1),
    env: options.env ?? process.env,
    compactMaxChars: options.compactMaxChars,
    digests: options.digests,
  };
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

/** Where the delta candidate left the result. */
type DeltaOutcome =
  | { readonly done: Step<ToolResult> }
  | { readonly step: Step<ToolResult>; readonly put?: PutResult; readonly planned?: PlannedView };

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

/**
 * The delta candidate: undefined when the result cannot have one; otherwise the exact text is
 * vaulted, the baseline advanced, and either the delta is shown (`done`) or the step carries why
 * not, with the put and the planned view for the compact candidate.
 */
async function deltaCandidate(
  d: DeltaParts,
  planner: CompressionPlanner | undefined,
  step: Step<ToolResult>,
  signal: AbortSignal,
  counter: MemoCounter | undefined,
  own: CompressToolResultOptions['counter'],
): Promise<DeltaOutcome | undefined> {
  const result = step.value;
  const { vault } = d;
  if (!d.flags.temporal || canonicalToolName(result.name, d.toolNames) !== 'terminal') return undefined;
  const command = commandOf(result.args);
  if (command === undefined || result.content.length < d.minChars || isRendering(result.content)) return undefined;
  // Size check first: what cannot be vaulted is never hashed, diffed or written.
  if (codePointLength(result.content) > d.maxArtifactChars)
    return { step: note(step, { stage: DELTA, kind: 'skipped', reason: 'over_ceiling' }) };
  if (result.content.length > SLICE_CHARS) await yieldSlice(signal); // an abort stops it before the first write
  const stateKey = baselineKey(step, command, d.scope, d.env);
  const store = storeScope(step.context);
  const put = await vaultToolResult(vault, result, step.context, planner?.options.digests ?? d.digests);
  let planned: PlannedView | undefined;
  const skip = (reason: string): DeltaOutcome => ({
    step: note(step, { stage: DELTA, kind: 'skipped', reason }),
    put,
    ...(planned === undefined ? {} : { planned }),
  });
  const previous = await vault.getBaseline(stateKey);
  // A step its subscriber left is never delivered: recording it as the baseline would make the next
  // run render a delta against an output the model was never shown.
  if (signal.aborted) return undefined;
  await vault.setBaseline(stateKey, put.artifactId, store); // the baseline advances even when the delta is rejected
  if (previous === undefined) return skip('baseline');
  if (counter !== undefined && result.content.length > COUNT_SLICE_CHARS)
    counter.prime(result.content, await countInSlices(own!, result.content, signal));
  const ids = { current: put.artifactId, previous: previous.artifactId };
  // The delta must beat what the compact candidate would show, not just the raw text.
  let bar: string;
  if (planner === undefined) bar = ownBar(result, command, ids.current, counter, d.compactMaxChars);
  else ({ bar, planned } = await compressionBar(planner, step, signal, put, counter, own));
  let before: string | undefined;
  if (ids.previous !== ids.current) {
    // Read in the baseline's scope: the tenant's session (or, workspace-wide, any of the tenant's sessions).
    const reads = scopedReads(vault, {
      tenant: store.tenant ?? '',
      ...(d.scope === 'session' ? { sessionId: step.context.sessionId } : {}),
    });
    before = await reads.read(ids.previous).catch(() => undefined);
    if (before === undefined) return skip('baseline_missing');
  }
  const candidate = deltaText(result, command, ids, before, bar);
  if (candidate === undefined || !strictlySmaller(bar, candidate, counter)) return skip('not_smaller');
  // Pin, then verify: another process may have pruned the previous output once it stopped being the baseline.
  await pinDelivered(vault, [ids.previous, ids.current], store, putContent(put, result.content));
  // What a request that does not show the base gets instead: the view a new session would get.
  await vault.setRendering(
    step.context.sessionId,
    deltaViewKey(ids.current),
    encodeDeltaView(bar, result.content),
    store,
  );
  return {
    done: advance(
      step,
      { ...result, content: candidate },
      {
        stage: DELTA,
        kind: 'applied',
        reason: ids.previous === ids.current ? 'unchanged' : 'changed',
        savedChars: codePointLength(result.content) - codePointLength(candidate),
        artifacts: [ids.current, ids.previous],
      },
    ),
  };
}

/** The compact candidate over `planned`, vaulting the exact text unless `put` already did. */
async function compactCandidate(
  planner: CompressionPlanner,
  step: Step<ToolResult>,
  signal: AbortSignal,
  planned: PlannedView,
  known: PutResult | undefined,
): Promise<Step<ToolResult> | undefined> {
  const { plan, counter } = planned;
  const result = step.value;
  if (plan === undefined) return undefined;
  if (plan.kind === 'over_ceiling') return overCeiling(planner, step, plan.input, plan.tool, plan.rawChars, signal);
  if (plan.kind === 'not_smaller') return note(step, { stage: COMPRESS, kind: 'skipped', reason: 'not_smaller' });
  const raw = result.content;
  signal.throwIfAborted(); // nothing is written after an abort
  const scope = storeScope(step.context);
  const put = known ?? (await vaultToolResult(planner.options.vault, result, step.context, planner.options.digests));
  const output = planOutput(plan, put.artifactId);
  if (!strictlySmaller(raw, output, counter))
    return note(step, { stage: COMPRESS, kind: 'skipped', reason: 'not_smaller' });
  // The note is about to be delivered: retention must never prune what it names.
  signal.throwIfAborted();
  await pinDelivered(planner.options.vault, [put.artifactId], scope, putContent(put, raw));
  const savedTokens = counter === undefined ? {} : { savedTokens: counter.count(raw) - counter.count(output) };
  return advance(
    step,
    { ...result, content: output },
    {
      stage: COMPRESS,
      kind: 'applied',
      reason: plan.tool === 'terminal' ? 'terminal_compacted' : 'native_compacted',
      savedChars: plan.rawChars - codePointLength(output),
      ...savedTokens,
      artifacts: [put.artifactId],
    },
  );
}

/** A bounded view of an output that cannot be stored, saying so; read in slices, never counted whole. */
async function overCeiling(
  planner: CompressionPlanner,
  step: Step<ToolResult>,
  input: ViewInput,
  tool: string,
  rawChars: number,
  signal: AbortSignal,
): Promise<Step<ToolResult>> {
  const { maxArtifactChars } = planner;
  // Beyond 4× the ceiling only the head and tail are read: the work stays bounded.
  const excerpt = await excerptLargeOutput(input.output, { signal, scanMiddle: rawChars <= 4 * maxArtifactChars });
  const what = excerpt.middleScanned
    ? 'its first and last lines and the diagnostic lines between them'
    : 'its first and last lines';
  const head =
    `[Token Terminator: this output is ${fmt(rawChars)} chars, over the ${fmt(maxArtifactChars)}-char artifact ceiling ` +
    `(TOKEN_TERMINATOR_MAX_ARTIFACT_CHARS): it was not stored and cannot be recovered. Shown: a compact view of ${what}. ` +
    'Counts in it cover the shown parts only. Re-run the command with narrower output (grep, head, tail) to see the rest.]';
  const output = `${head}\n${renderToolView({ ...input, output: excerpt.text }, { ...planner.view, tool }).trimEnd()}`;
  return advance(
    step,
    { ...step.value, content: output },
    { stage: COMPRESS, kind: 'applied', reason: 'over_ceiling', savedChars: rawChars - codePointLength(output) },
  );
}

const fmt = (n: number): string => n.toLocaleString('en-US');
