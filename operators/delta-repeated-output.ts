/**
 * `deltaRepeatedOutput`: a repeated terminal observation (same scope, cwd, backend and command)
 * becomes a unified diff against the previous output. The new exact output is
 * vaulted first and the baseline always advances; the diff is shown only when it is strictly
 * smaller than both the raw output and the current compact rendering.
 */
import { defaultInt } from '../src/config/index.js';
import { STAGES } from '../src/stages.js';
import type { OperatorFunction } from 'rxjs';
import {
  baselineKey,
  compressionBar,
  deltaText,
  deltaViewKey,
  encodeDeltaView,
  ownBar,
} from '../src/compact/temporal-delta.js';
import { codePointLength } from '../src/compact/lines.js';
import { strictlySmaller } from '../src/accept.js';
import { handOn, isRendering, prepared } from '../src/compact/prepared.js';
import { memoCounter, pinDelivered, putContent, vaultToolResult } from '../src/compact/receipt.js';
import { scopedReads } from '../src/vault/scoped-reads.js';
import { COUNT_SLICE_CHARS, countInSlices, SLICE_CHARS, yieldSlice } from '../src/compact/slices.js';
import type { ModeFlags } from '../src/config/index.js';
import type { Mode } from '../src/config/types.js';
import { intOption, oneOfOption, requireVault } from '../src/options.js';
import type { TokenCounter } from '../src/measure/types.js';
import { stepOperator } from '../src/operator-kit.js';
import { advance, note, storeScope, type Step, type ToolResult } from '../src/step.js';
import { compressionPlanner, type CompressToolResultOptions } from '../src/compact/compression-plan.js';
import { commandOf } from '../src/tools/command.js';
import { resolveFlags } from '../src/tools/modes.js';
import { canonicalToolName, validateToolNames } from '../src/tools/names.js';
import type { ArtifactStore, LeaseStore, SessionStore } from '../src/vault/ports.js';

const STAGE = STAGES.deltaRepeatedOutput;

/** Options of {@link deltaRepeatedOutput}; only `vault` is required. */
export interface DeltaRepeatedOutputOptions {
  /** Where exact outputs and baselines live (required). */
  readonly vault: ArtifactStore & LeaseStore & Pick<SessionStore, 'getBaseline' | 'setBaseline' | 'setRendering'>;
  /**
   * Exact token counter: a delta must also use fewer tokens.
   *
   * @defaultValue none (only the character count is compared)
   */
  readonly counter?: TokenCounter;
  /**
   * Mode gate (on in balanced and aggressive); ignored when `flags` is given.
   *
   * @defaultValue `'balanced'`
   */
  readonly mode?: Mode;
  /**
   * Mode flags computed from the config; `flags.temporal` gates this operator.
   *
   * @defaultValue the flags of `mode`
   */
  readonly flags?: ModeFlags;
  /**
   * Baselines per session (`session`) or shared across sessions (`workspace`).
   *
   * @defaultValue `'session'`
   */
  readonly scope?: 'session' | 'workspace';
  /**
   * Smaller outputs are left alone (TOKEN_TERMINATOR_TEMPORAL_MIN_CHARS, ≥ 1).
   *
   * @defaultValue `2000` (config `temporalMinChars`)
   */
  readonly minChars?: number;
  /**
   * Size target of the compact rendering a delta must beat when no `compression` is given.
   *
   * @defaultValue `4000`
   */
  readonly compactMaxChars?: number;
  /**
   * The options of the compressToolResult stage that follows (the same object): a delta must
   * then beat exactly what that stage would show instead (its view, focus lines and note, or the
   * raw output when it would leave the result alone), and the view is rendered once, for both
   * stages. Without it the bar is the terminal compaction at `compactMaxChars`.
   *
   * @defaultValue none
   */
  readonly compression?: CompressToolResultOptions;
  /**
   * Host tool name → canonical name.
   *
   * @defaultValue none (only the canonical names and their built-in aliases are recognised)
   */
  readonly toolNames?: Readonly<Record<string, string>>;
  /**
   * Longer outputs cannot be vaulted and are left to compressToolResult's bounded view (TOKEN_TERMINATOR_MAX_ARTIFACT_CHARS).
   *
   * @defaultValue `2_000_000` (config `maxArtifactChars`)
   */
  readonly maxArtifactChars?: number;
  /**
   * Environment read for TERMINAL_ENV/TERMINAL_BACKEND.
   *
   * @defaultValue `process.env`
   */
  readonly env?: Readonly<Record<string, string | undefined>>;
}

/**
 * Turn a terminal output that repeats an earlier run of the same command into a unified diff
 * against that run, when the diff is strictly smaller than both the raw output and its compact
 * rendering; the exact output is vaulted first and always becomes the new baseline.
 *
 * @example
 * results$.pipe(deltaRepeatedOutput({ vault }), compressToolResult({ vault }))
 */
export function deltaRepeatedOutput(
  options: DeltaRepeatedOutputOptions,
): OperatorFunction<Step<ToolResult>, Step<ToolResult>> {
  const name = 'deltaRepeatedOutput';
  requireVault(name, options);
  const flags = resolveFlags(name, options);
  const toolNames = validateToolNames(name, options.toolNames);
  const scope = oneOfOption(name, 'scope', options.scope, 'session', ['session', 'workspace']);
  const minChars = intOption(name, 'minChars', options.minChars, defaultInt('temporalMinChars'), 1);
  const maxArtifactChars = intOption(
    name,
    'maxArtifactChars',
    options.maxArtifactChars,
    defaultInt('maxArtifactChars'),
    1,
  );
  const { vault } = options;
  const env = options.env ?? process.env;
  const compression = options.compression === undefined ? undefined : compressionPlanner(options.compression);
  return stepOperator<ToolResult>(STAGE, () => async (step, signal) => {
    const result = step.value;
    const counter = memoCounter(options.counter);
    if (!flags.temporal || canonicalToolName(result.name, toolNames) !== 'terminal') return undefined;
    const command = commandOf(result.args);
    if (command === undefined || result.content.length < minChars || isRendering(result.content)) return undefined;
    // Size check first: what cannot be vaulted is never hashed, diffed or written.
    if (codePointLength(result.content) > maxArtifactChars)
      return note(step, { stage: STAGE, kind: 'skipped', reason: 'over_ceiling' });
    if (result.content.length > SLICE_CHARS) await yieldSlice(signal); // an abort stops it before the first write
    const stateKey = baselineKey(step, command, scope, env);
    const store = storeScope(step.context);
    const current = await vaultToolResult(vault, result, step.context);
    // The exact text is vaulted once per pass: a later compressToolResult reuses this put.
    const shared = prepared(step, vault, current);
    const skip = (reason: string): Step<ToolResult> =>
      note(step, handOn({ stage: STAGE, kind: 'skipped', reason }, shared));
    const previous = await vault.getBaseline(stateKey);
    // A step its subscriber left is never delivered: recording it as the baseline would make the next
    // run render a delta against an output the model was never shown.
    if (signal.aborted) return undefined;
    await vault.setBaseline(stateKey, current.artifactId, store); // the baseline advances even when the delta is rejected
    if (previous === undefined) return skip('baseline');
    if (counter !== undefined && result.content.length > COUNT_SLICE_CHARS)
      counter.prime(result.content, await countInSlices(options.counter!, result.content, signal));
    const ids = { current: current.artifactId, previous: previous.artifactId };
    // The delta must beat what the next stage would show, not just the raw text.
    const bar =
      compression === undefined
        ? ownBar(result, command, ids.current, counter, options.compactMaxChars)
        : await compressionBar(compression, step, signal, shared, counter, options.counter);
    let before: string | undefined;
    if (ids.previous !== ids.current) {
      // Read in the baseline's scope: the tenant's session (or, workspace-wide, any of the tenant's sessions).
      const reads = scopedReads(vault, {
        tenant: store.tenant ?? '',
        ...(scope === 'session' ? { sessionId: step.context.sessionId } : {}),
      });
      before = await reads.read(ids.previous).catch(() => undefined);
      if (before === undefined) return skip('baseline_missing');
    }
    const candidate = deltaText(result, command, ids, before, bar);
    if (candidate === undefined || !strictlySmaller(bar, candidate, counter)) return skip('not_smaller');
    // Pin, then verify: another process may have pruned the previous output once it stopped being the baseline.
    await pinDelivered(vault, [ids.previous, ids.current], store, putContent(current, result.content));
    // What a request that does not show the base gets instead: the view a new session would get.
    await vault.setRendering(
      step.context.sessionId,
      deltaViewKey(ids.current),
      encodeDeltaView(bar, result.content),
      store,
    );
    return advance(
      step,
      { ...result, content: candidate },
      {
        stage: STAGE,
        kind: 'applied',
        reason: ids.previous === ids.current ? 'unchanged' : 'changed',
        savedChars: codePointLength(result.content) - codePointLength(candidate),
        artifacts: [ids.current, ids.previous],
      },
    );
  });
}
