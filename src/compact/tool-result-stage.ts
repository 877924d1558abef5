/**
 * The candidates of the tool-result stage (operators/reduce-tool-result.ts): the delta against the
 * baseline of the same terminal command and the compact view with its recovery note, each vaulting
 * the exact text (once between them) and pinning what it shows with its known content.
 */
import { strictlySmaller } from '../accept.js';
import { defaultInt, type ModeFlags } from '../config/index.js';
import type { Mode } from '../config/types.js';
import { intOption, oneOfOption, requireVault } from '../options.js';
import { STAGES } from '../stages.js';
import { advance, note, storeScope, type Step, type ToolResult } from '../step.js';
import { commandOf } from '../tools/command.js';
import { resolveFlags } from '../tools/modes.js';
import { canonicalToolName, validateToolNames } from '../tools/names.js';
import type { ArtifactStore, LeaseStore, SessionStore } from '../vault/ports.js';
import { scopedReads } from '../vault/scoped-reads.js';
import type { PutResult } from '../vault/types.js';
import {
  isRendering,
  planOutput,
  type CompressionPlanner,
  type CompressToolResultOptions,
  type PlannedView,
} from './compression-plan.js';
import { excerptLargeOutput } from './large-output.js';
import { codePoints } from '../measure/canonical-json.js';
import { pinDelivered, vaultToolResult, type MemoCounter } from './receipt.js';
import { COUNT_SLICE_CHARS, countInSlices, SLICE_CHARS, yieldSlice } from './slices.js';
import { baselineKey, compressionBar, deltaText, deltaViewKey, encodeDeltaView, ownBar } from './temporal-delta.js';
import { renderToolView, type ViewInput } from './tool-view.js';

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

/** The delta candidate, validated once. */
export type DeltaParts = Readonly<ReturnType<typeof deltaParts>>;

/** The delta candidate's parts from its options (`name`: the operator the options were given to). */
export function deltaParts(name: string, options: DeltaCandidateOptions) {
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

/** Where the delta candidate left the result. */
export type DeltaOutcome =
  | { readonly done: Step<ToolResult> }
  | { readonly step: Step<ToolResult>; readonly put?: PutResult; readonly planned?: PlannedView };

/**
 * The delta candidate: undefined when the result cannot have one; otherwise the exact text is
 * vaulted, the baseline advanced, and either the delta is shown (`done`) or the step carries why
 * not, with the put and the planned view for the compact candidate.
 */
export async function deltaCandidate(
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
  if (codePoints(result.content) > d.maxArtifactChars)
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
  await pinDelivered(vault, [ids.previous, ids.current], store, put, result.content);
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
        savedChars: codePoints(result.content) - codePoints(candidate),
        artifacts: [ids.current, ids.previous],
      },
    ),
  };
}

/** The compact candidate over `planned`, vaulting the exact text unless `put` already did. */
export async function compactCandidate(
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
  await pinDelivered(planner.options.vault, [put.artifactId], scope, put, raw);
  const savedTokens = counter === undefined ? {} : { savedTokens: counter.count(raw) - counter.count(output) };
  return advance(
    step,
    { ...result, content: output },
    {
      stage: COMPRESS,
      kind: 'applied',
      reason: plan.tool === 'terminal' ? 'terminal_compacted' : 'native_compacted',
      savedChars: plan.rawChars - codePoints(output),
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
    { stage: COMPRESS, kind: 'applied', reason: 'over_ceiling', savedChars: rawChars - codePoints(output) },
  );
}

const fmt = (n: number): string => n.toLocaleString('en-US');
