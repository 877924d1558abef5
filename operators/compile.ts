import type { OperatorFunction } from 'rxjs';
import { readRequest, writeSlots, type RequestView } from '../src/model/index.js';
import { canonicalJson, serializedChars } from '../src/measure/index.js';
import type { WorkingStateStore } from '../src/recovery/working-state.js';
import { workingStateBlock } from '../src/compile/working-state.js';
import type { TokenCounter } from '../src/measure/types.js';
import { stepOperator } from '../src/operator-kit.js';
import { advance, note, type ProviderRequest, type Step } from '../src/step.js';
import type { ArtifactStore, LeaseStore } from '../src/vault/ports.js';
import { gate } from '../src/compile/apply.js';
import { planCompaction } from '../src/compile/compaction.js';
import { createSessionPool, intOption } from '../src/compile/session.js';
import { horizons, segmentSteps } from '../src/compile/steps.js';

const STAGE = 'compileRequest';

/** Options of {@link compileRequest}. A "turn" is one model round (a step: see docs/cache-policy.md). */
export interface CompileRequestOptions {
  /** Where collapsed turns and receipted outputs are vaulted. Required. */
  readonly vault: ArtifactStore & LeaseStore;
  /** Adds the token half of the acceptance gate when exact. Default: none (chars only). */
  readonly counter?: TokenCounter;
  /** Tool outputs of old turns at least this long become receipts. Default 4000 (TOKEN_TERMINATOR_CONTEXT_MIN_VAULT_CHARS; floor 100). */
  readonly minVaultChars?: number;
  /** Longer outputs cannot be vaulted and stay inline. Default 2,000,000 (TOKEN_TERMINATOR_MAX_ARTIFACT_CHARS). */
  readonly maxArtifactChars?: number;
  /** Turns older than this collapse into vaulted blocks; 0 disables collapse. Default 6 (TOKEN_TERMINATOR_CONTEXT_COLLAPSE_AFTER_TURNS). */
  readonly collapseAfterTurns?: number;
  /** The newest turns always stay verbatim. Default 5 (TOKEN_TERMINATOR_CONTEXT_INLINE_RECENT_TURNS). */
  readonly inlineRecentTurns?: number;
  /**
   * Boundaries advance in blocks of this many turns (prompt-cache stability). Default
   * min(8, collapseAfterTurns), or 8 when collapse is off: visible history then stays within
   * [collapseAfterTurns, collapseAfterTurns + blockTurns) turns.
   */
  readonly blockTurns?: number;
  /**
   * Budget of the working-state block (TOKEN_TERMINATOR_WORKING_GRAPH_CHARS). Default 0 (off). With a
   * budget and a `workingState` store, the session's block is appended to the last user text of a
   * request this stage already reduced, and kept only if the whole request stays strictly smaller.
   */
  readonly workingGraphChars?: number;
  /** Where the working state lives (the store behind working_state_apply / _get). Default: none. */
  readonly workingState?: WorkingStateStore;
}

/**
 * Context compaction with the acceptance gate. Large tool outputs of old turns become receipts;
 * turns older than `collapseAfterTurns` collapse losslessly into vaulted blocks named by a note
 * (merged into the first retained user message, or carried by a user message with the task
 * text, so roles stay valid); the recent turns stay verbatim; multimodal parts are kept. Both
 * horizons move in whole blocks of turns, and renderings are memoized, so between boundaries
 * compiled request N+1 starts with compiled request N byte for byte.
 *
 * @example
 * requests$.pipe(collapseDuplicates({ vault }), routeSkills(), compileRequest({ vault, counter }))
 */
export function compileRequest(options: CompileRequestOptions): OperatorFunction<Step<ProviderRequest>, Step<ProviderRequest>> {
  if (options?.vault === undefined) throw new TypeError(`${STAGE}: options.vault is required`);
  const minVaultChars = intOption(STAGE, 'minVaultChars', options.minVaultChars, 4000, 100);
  const maxArtifactChars = intOption(STAGE, 'maxArtifactChars', options.maxArtifactChars, 2_000_000, 1);
  const collapseAfterSteps = intOption(STAGE, 'collapseAfterTurns', options.collapseAfterTurns, 6, 0);
  const inlineRecentSteps = intOption(STAGE, 'inlineRecentTurns', options.inlineRecentTurns, 5, 0);
  const blockSteps = intOption(STAGE, 'blockTurns', options.blockTurns, collapseAfterSteps > 0 ? Math.min(8, collapseAfterSteps) : 8, 1);
  const workingGraphChars = intOption(STAGE, 'workingGraphChars', options.workingGraphChars, 0, 0);
  const { vault, counter } = options;
  const policy = { collapseAfterSteps, inlineRecentSteps, blockSteps };
  return stepOperator(STAGE, () => {
    const sessions = createSessionPool({ vault, ...(counter === undefined ? {} : { counter }) });
    // Synchronous until some turn is old enough, so pass-through Steps emit synchronously.
    return (step) => {
      const view = readRequest(step.value);
      if (view.listKey === undefined) return undefined;
      return horizons(segmentSteps(view.itemInfo).starts.length, policy).sealed === 0 ? undefined : reduce(step, view);
    };
    async function reduce(step: Step<ProviderRequest>, view: RequestView): Promise<Step<ProviderRequest> | undefined> {
      const sessionId = step.context.sessionId;
      const state = sessions(sessionId);
      const plan = await planCompaction(state, view, { sessionId, minVaultChars, maxArtifactChars, ...policy });
      if (plan === undefined) return undefined;
      const measured = gate(state, step.value, view, plan.items, plan.receipts);
      if (!measured.verdict.accepted) return note(step, { stage: STAGE, kind: 'skipped', reason: measured.verdict.reason });
      const artifacts = [...new Set(plan.receipts.map((r) => r.artifactId))];
      await state.evidence.pin(artifacts);
      const request = await withWorkingState(step.value, measured.request, sessionId);
      return advance(step, request, {
        stage: STAGE,
        kind: 'applied',
        reason: `${plan.receiptedOutputs} old output(s) receipted, ${plan.collapsedSteps} turn(s) collapsed`,
        savedChars: measured.savedChars,
        ...(measured.savedTokens === undefined ? {} : { savedTokens: measured.savedTokens }),
        artifacts,
      });
    }
    /** The block rides only on savings: the candidate must stay strictly smaller than the caller's request. */
    async function withWorkingState(raw: ProviderRequest, compiled: ProviderRequest, sessionId: string): Promise<ProviderRequest> {
      if (workingGraphChars === 0 || options.workingState === undefined) return compiled;
      const block = await workingStateBlock(options.workingState, sessionId, workingGraphChars);
      if (block === '') return compiled;
      const view = readRequest(compiled);
      const slot = view.slots.filter((s) => s.kind === 'user').at(-1);
      const content = (slot?.value as { content?: unknown } | undefined)?.content;
      if (slot === undefined) return compiled;
      let change: { path: readonly (string | number)[]; value: unknown };
      if (typeof content === 'string') change = { path: [...slot.path, 'content'], value: content === '' ? block : `${content}\n\n${block}` };
      else if (Array.isArray(content)) change = { path: [...slot.path, 'content'], value: [...content, { type: view.format === 'responses' ? 'input_text' : 'text', text: block }] };
      else return compiled;
      const candidate = writeSlots(compiled, [change]);
      if (serializedChars(candidate) >= serializedChars(raw)) return compiled;
      if (counter?.exact === true && counter.count(canonicalJson(candidate, { compact: true })) >= counter.count(canonicalJson(raw, { compact: true }))) return compiled;
      return candidate;
    }
  });
}
