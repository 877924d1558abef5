import { STAGES } from '../src/stages.js';
import type { OperatorFunction } from 'rxjs';
import { PRICING_PROFILES, pricingFor, validateProfile, type PricingProfile } from '../src/config/pricing.js';
import { readRequest, withItems, writeSlots } from '../src/model/index.js';
import { canonicalJson, serializedChars } from '../src/measure/index.js';
import type { WorkingStateStore } from '../src/recovery/working-state.js';
import { workingStateBlock } from '../src/compile/working-state.js';
import type { TokenCounter } from '../src/measure/types.js';
import { stepOperator } from '../src/operator-kit.js';
import { advance, note, storeScope, type ProviderRequest, type Step } from '../src/step.js';
import type { ArtifactStore, LeaseStore, SessionStore } from '../src/vault/ports.js';
import { requestStore } from '../src/vault/scoped-reads.js';
import { acceptCandidate } from '../src/accept.js';
import { gate } from '../src/compile/apply.js';
import { createConversationMemo, type ConversationMemo, type RequestMarks } from '../src/compile/conversation.js';
import { planHistory } from '../src/compile/history.js';
import {
  hostToolOutputs,
  observationSlots,
  observationTest,
  type ObservationSetting,
} from '../src/compile/observations.js';
import { mayBeDelta, resolveDanglingDeltas } from '../src/compile/references.js';
import type { Recognised } from '../src/compile/prefix.js';
import type { ItemMeasures } from '../src/compile/item-measures.js';
import { createSessionPool, type SessionState } from '../src/compile/session.js';
import { checkOptions, intOption, requireVault } from '../src/options.js';
import { CONFIG_DEFAULTS, defaultInt } from '../src/config/index.js';

const STAGE = STAGES.compileRequest;

/** Options of {@link compileRequest}. A "turn" is one model round (a step: see docs/cache-policy.md). */
export interface CompileRequestOptions {
  /** Where rewritten outputs are vaulted and the conversation's decisions are mirrored. Required. */
  readonly vault: ArtifactStore & LeaseStore & SessionStore;
  /**
   * Adds the token half of the acceptance gate when exact.
   *
   * @defaultValue none (only the character count is compared)
   */
  readonly counter?: TokenCounter;
  /**
   * The per-item measurement memo to share with the other request stages, the output-budget
   * counter and telemetry (see `createItemMeasures`); read only when it counts with `counter`.
   *
   * @defaultValue none: one of the operator's own per session
   */
  readonly measures?: ItemMeasures;
  /**
   * Old tool outputs at least this long become a digest plus a receipt (≥ 100).
   *
   * @defaultValue `600` (config `contextMinVaultChars`, TOKEN_TERMINATOR_CONTEXT_MIN_VAULT_CHARS)
   */
  readonly minVaultChars?: number;
  /**
   * Longer outputs cannot be vaulted and stay inline (≥ 1).
   *
   * @defaultValue `2_000_000` (config `maxArtifactChars`, TOKEN_TERMINATOR_MAX_ARTIFACT_CHARS)
   */
  readonly maxArtifactChars?: number;
  /**
   * Outputs of the newest turns are never rewritten (≥ 1).
   *
   * @defaultValue `1` (config `contextInlineRecentTurns`, TOKEN_TERMINATOR_CONTEXT_INLINE_RECENT_TURNS)
   */
  readonly inlineRecentTurns?: number;
  /**
   * Requests that must have shown an output inline before a rewrite may replace it (1 … 100).
   *
   * @defaultValue `1` (config `inlineLeases`, at least 1; TOKEN_TERMINATOR_INLINE_LEASES)
   */
  readonly inlineLeases?: number;
  /**
   * 0: history is rewritten when the cache-economic rule says the batch pays for the
   * cache it breaks. n ≥ 1: the fixed-block policy, everything old enough is rewritten whenever
   * the turn count crosses a multiple of n (TOKEN_TERMINATOR_CONTEXT_BLOCK_TURNS).
   *
   * @defaultValue `0` (config `contextBlockTurns`)
   */
  readonly blockTurns?: number;
  /**
   * Requests the rule expects after this one; 0 = as many as the conversation has had (TOKEN_TERMINATOR_REWRITE_HORIZON_REQUESTS).
   *
   * @defaultValue `0` (config `rewriteHorizonRequests`)
   */
  readonly requestsAhead?: number;
  /**
   * When an old output may become a digest: `working-set` once the agent has not referred to it
   * for `workingSetIdleTurns` turns (the expected recoveries priced into the rewrite rule),
   * `lazy` from the request after it was shown (TOKEN_TERMINATOR_HISTORY_POLICY).
   *
   * @defaultValue `'working-set'` (config `historyPolicy`)
   */
  readonly historyPolicy?: 'working-set' | 'lazy';
  /**
   * Idle turns before the working-set policy lets an output become a digest (≥ 1;
   * TOKEN_TERMINATOR_WORKING_SET_IDLE_TURNS).
   *
   * @defaultValue `2` (config `workingSetIdleTurns`)
   */
  readonly workingSetIdleTurns?: number;
  /**
   * The route's prompt-cache pricing, fixed or chosen per request.
   *
   * @defaultValue by route: `route.pricing`, else Anthropic-style for Claude/Anthropic routes, OpenAI-style otherwise
   */
  readonly pricing?: PricingProfile | ((step: Step<ProviderRequest>) => PricingProfile);
  /**
   * Budget of the failure lines a digest keeps (code points, ≥ 0).
   *
   * @defaultValue `400` (config `digestDiagnosticChars`, TOKEN_TERMINATOR_DIGEST_DIAGNOSTIC_CHARS)
   */
  readonly digestDiagnosticChars?: number;
  /**
   * Opt-in: old assistant prose outside fenced command blocks becomes a receipt (TOKEN_TERMINATOR_REASONING_REDUCTION).
   *
   * @defaultValue `false`
   */
  readonly reasoning?: boolean;
  /**
   * Opt-in turn collapse: outputs of turns older than this become bare receipts and their
   * reasoning is reduced; the instruction prefix, user messages and actions stay; 0 = off
   * (TOKEN_TERMINATOR_CONTEXT_COLLAPSE_AFTER_TURNS).
   *
   * @defaultValue `0` (config `contextCollapseAfterTurns`)
   */
  readonly collapseAfterTurns?: number;
  /**
   * Which user messages of a text-protocol agent are command output: a pattern, a predicate (the
   * host's own mapping) or `'none'`.
   *
   * @defaultValue the default of TOKEN_TERMINATOR_OBSERVATION_PATTERN
   */
  readonly observations?: ObservationSetting;
  /**
   * Budget of the working-state block (TOKEN_TERMINATOR_WORKING_GRAPH_CHARS); 0 = off. With a
   * budget and a `workingState` store, the session's block is appended to the last user text of a
   * request this stage already reduced, and kept only if the whole request stays strictly smaller.
   *
   * @defaultValue `0` (config `workingGraphChars`)
   */
  readonly workingGraphChars?: number;
  /**
   * Where the working state lives (the store behind working_state_apply / _get).
   *
   * @defaultValue none
   */
  readonly workingState?: WorkingStateStore;
}

/**
 * History that keeps the trajectory. Old tool outputs become a digest (exit status, size, first
 * line, failure lines) plus a receipt, in batches the cache-economic rule approves; the
 * instruction prefix, every user message and every assistant action are never touched, and an
 * output is never replaced before this conversation saw it. Between rewrites compiled request N+1
 * starts with compiled request N byte for byte. A delta whose base the rewrite hid is replaced by
 * the output it stands for.
 *
 * @example
 * requests$.pipe(collapseDuplicates({ vault }), compileRequest({ vault, counter }))
 */
export function compileRequest(
  options: CompileRequestOptions,
): OperatorFunction<Step<ProviderRequest>, Step<ProviderRequest>> {
  requireVault(STAGE, options);
  const minChars = intOption(STAGE, 'minVaultChars', options.minVaultChars, defaultInt('contextMinVaultChars'), 100);
  const maxArtifactChars = intOption(
    STAGE,
    'maxArtifactChars',
    options.maxArtifactChars,
    defaultInt('maxArtifactChars'),
    1,
  );
  const inlineRecentTurns = intOption(
    STAGE,
    'inlineRecentTurns',
    options.inlineRecentTurns,
    defaultInt('contextInlineRecentTurns'),
    1,
  );
  const inlineLeases = intOption(
    STAGE,
    'inlineLeases',
    options.inlineLeases,
    Math.max(1, defaultInt('inlineLeases')),
    1,
    100,
  );
  const blockTurns = intOption(STAGE, 'blockTurns', options.blockTurns, defaultInt('contextBlockTurns'), 0);
  const requestsAhead = intOption(
    STAGE,
    'requestsAhead',
    options.requestsAhead,
    defaultInt('rewriteHorizonRequests'),
    0,
  );
  const historyPolicy = options.historyPolicy ?? (CONFIG_DEFAULTS.historyPolicy as 'working-set' | 'lazy');
  checkOptions(
    STAGE,
    historyPolicy === 'working-set' || historyPolicy === 'lazy',
    "options.historyPolicy must be 'working-set' or 'lazy'",
  );
  const workingSetIdleTurns = intOption(
    STAGE,
    'workingSetIdleTurns',
    options.workingSetIdleTurns,
    defaultInt('workingSetIdleTurns'),
    1,
  );
  const digestDiagnosticChars = intOption(
    STAGE,
    'digestDiagnosticChars',
    options.digestDiagnosticChars,
    defaultInt('digestDiagnosticChars'),
    0,
  );
  const collapseAfterTurns = intOption(
    STAGE,
    'collapseAfterTurns',
    options.collapseAfterTurns,
    defaultInt('contextCollapseAfterTurns'),
    0,
  );
  checkOptions(
    STAGE,
    collapseAfterTurns === 0 || collapseAfterTurns >= inlineRecentTurns,
    'options.collapseAfterTurns must be 0 or ≥ options.inlineRecentTurns',
  );
  const workingGraphChars = intOption(
    STAGE,
    'workingGraphChars',
    options.workingGraphChars,
    defaultInt('workingGraphChars'),
    0,
  );
  const isObservation = observationTest(STAGE, options.observations);
  const fixedPricing =
    typeof options.pricing === 'object' ? validateProfile(`${STAGE}: options.pricing`, options.pricing) : undefined;
  const { counter, measures } = options;
  // Reads by id only through a session's scoped reads (`state.reads`): this stage's store has none.
  const vault = requestStore(options.vault);
  return stepOperator(STAGE, () => {
    const sessions = createSessionPool({
      vault: options.vault,
      ...(counter === undefined ? {} : { counter }),
      ...(measures === undefined ? {} : { measures }),
    });
    const memos = new Map<string, ConversationMemo>();
    const memoOf = (sessionId: string): ConversationMemo => {
      let memo = memos.get(sessionId);
      if (memo === undefined) {
        memos.set(sessionId, (memo = createConversationMemo(vault, sessionId, inlineLeases)));
        if (memos.size > 256) memos.delete(memos.keys().next().value as string);
      }
      return memo;
    };
    // Synchronous until there is a history, so pass-through Steps emit synchronously.
    return (step) => {
      // The history the session's previous request had is recognised, not re-read (src/compile/prefix.ts).
      const state = sessions(step.context);
      const seen = state.requests.recognise(step.value);
      const view = seen.view;
      if (view.listKey === undefined || !view.itemInfo.some((i) => i.role === 'assistant')) return undefined;
      return reduce(step, state, seen);
    };
    async function reduce(
      step: Step<ProviderRequest>,
      state: SessionState,
      seen: Recognised,
    ): Promise<Step<ProviderRequest> | undefined> {
      const sessionId = step.context.sessionId;
      const view = seen.view;
      const raw: ProviderRequest = seen.request;
      const memo = memoOf(sessionId);
      const scope = storeScope(step.context);
      state.evidence.begin(scope);
      // The recovery tool's results are what the model asked for: never rewritten or receipted.
      const outputs = [...hostToolOutputs(view), ...observationSlots(view, isObservation)];
      const pricing =
        fixedPricing ??
        (typeof options.pricing === 'function'
          ? options.pricing(step)
          : pricingFor(
              {
                pricingProfile: 'auto',
                cacheReadMultiplier: undefined,
                cacheWriteMultiplier: undefined,
                minCachePrefixTokens: undefined,
              },
              step.context.route,
              view.format,
            ));
      // Delivery is the commit point: when an artifact a planned receipt names is gone by then,
      // the memo forgets it and the history is planned once more (its content is vaulted again
      // from the request); if that still cannot be delivered, the request passes through.
      // At most two re-plans, each for its own reason: a refused new batch, and gone artifacts.
      let newBatch = true;
      let replannedForGone = false;
      for (;;) {
        const plan = await planHistory(state, memo, view, outputs, {
          newBatch,
          sessionId,
          minChars,
          maxArtifactChars,
          inlineRecentTurns,
          inlineLeases,
          blockTurns,
          requestsAhead,
          policy: historyPolicy,
          idleTurns: workingSetIdleTurns,
          digestDiagnosticChars,
          collapseAfterTurns,
          reasoning: options.reasoning === true,
          pricing: pricing ?? PRICING_PROFILES.openai,
        });
        if (plan === undefined) return undefined;
        // One vault transaction for what the request decided (not one per output shown or rewritten).
        const markShown = async (rewritten: RequestMarks['rewritten'] = [], full: string[] = []): Promise<void> => {
          const shown = full.length === 0 ? plan.shown : [...plan.shown, ...full];
          const write = memo.markRequest(plan.requestKey, { shown, rewritten }, scope);
          if (write !== undefined) await write;
        };
        const vaultNote = {
          stage: STAGE,
          kind: 'failed_open' as const,
          reason: `${plan.failed} rewrite(s) left inline: the vault could not store their artifact`,
          error: plan.failure ?? 'Error',
        };
        if (plan.items === view.items) {
          await markShown();
          return plan.failed > 0 ? note(step, vaultNote) : undefined;
        }
        // A rewrite must not leave a delta pointing at an output it just hid.
        let items = plan.items;
        // Renderings are digests, receipts and notes, never deltas: without a delta among the
        // request's outputs there is none to resolve, and the rewritten request is not read again.
        const { resolved } = outputs.some((s) => mayBeDelta(s.value))
          ? await resolveRewritten(state, withItems(raw, view.listKey!, items))
          : { resolved: [] };
        if (resolved.length > 0)
          items = writeSlots(
            withItems(raw, view.listKey!, items),
            resolved.map((r) => ({ path: r.slot.path, value: r.text })),
          )[view.listKey!] as unknown[];
        const measured = gate(state, raw, view, items, plan.receipts);
        if (!measured.verdict.accepted) {
          // A new batch that does not pay for itself must not take the earlier renderings down with
          // it (the request would pass through raw and void the provider's cached prefix): plan
          // again with the earlier decisions only.
          if (plan.batch && newBatch) {
            newBatch = false;
            continue;
          }
          await markShown();
          return note(step, { stage: STAGE, kind: 'skipped', reason: measured.verdict.reason });
        }
        const artifacts = [...new Set(plan.receipts.map((r) => r.artifactId))];
        const gone = await state.evidence.deliver(artifacts, scope);
        if (gone.length > 0) {
          if (!replannedForGone) {
            replannedForGone = true;
            continue;
          }
          return note(step, {
            stage: STAGE,
            kind: 'failed_open',
            reason: `${gone.length} receipt(s) named artifacts gone before delivery: passed through`,
            error: 'ArtifactGone',
          });
        }
        // Deltas of changed outputs this request shows resolved: the output itself was shown.
        const full = resolved.flatMap((r) => {
          const key = plan.fullShown.get(JSON.stringify(r.slot.path));
          return key === undefined ? [] : [key];
        });
        await markShown(plan.decided, full);
        const request = seen.restore(await withWorkingState(raw, measured.request, sessionId));
        if (plan.failed > 0) step = note(step, vaultNote);
        const what = [
          `${plan.rewrittenOutputs} old output(s) digested`,
          ...(plan.reducedReasoning > 0 ? [`${plan.reducedReasoning} reasoning text(s) reduced`] : []),
          ...(plan.batch ? ['new batch'] : []),
        ];
        return advance(step, request, {
          stage: STAGE,
          kind: 'applied',
          reason: what.join(', '),
          savedChars: measured.savedChars,
          ...(measured.savedTokens === undefined ? {} : { savedTokens: measured.savedTokens }),
          artifacts,
        });
      }
    }
    /** Dangling deltas of the rewritten request (an output the rewrite hid was their base). */
    function resolveRewritten(state: SessionState, request: ProviderRequest): ReturnType<typeof resolveDanglingDeltas> {
      const rewritten = readRequest(request);
      return resolveDanglingDeltas(state.reads, rewritten, [
        ...rewritten.slots.filter((s) => s.kind === 'tool_output'),
        ...observationSlots(rewritten, isObservation),
      ]);
    }
    /** The block rides only on savings: the candidate must stay strictly smaller than the caller's request. */
    async function withWorkingState(
      raw: ProviderRequest,
      compiled: ProviderRequest,
      sessionId: string,
    ): Promise<ProviderRequest> {
      if (workingGraphChars === 0 || options.workingState === undefined) return compiled;
      const block = await workingStateBlock(options.workingState, sessionId, workingGraphChars);
      if (block === '') return compiled;
      const view = readRequest(compiled);
      const slot = view.slots.filter((s) => s.kind === 'user').at(-1);
      const content = (slot?.value as { content?: unknown } | undefined)?.content;
      if (slot === undefined) return compiled;
      let change: { path: readonly (string | number)[]; value: unknown };
      if (typeof content === 'string')
        change = { path: [...slot.path, 'content'], value: content === '' ? block : `${content}\n\n${block}` };
      else if (Array.isArray(content))
        change = {
          path: [...slot.path, 'content'],
          value: [...content, { type: view.format === 'responses' ? 'input_text' : 'text', text: block }],
        };
      else return compiled;
      const candidate = writeSlots(compiled, [change]);
      const exact = counter?.exact === true ? counter : undefined;
      const verdict = acceptCandidate({
        rawChars: serializedChars(raw),
        candidateChars: serializedChars(candidate),
        receipts: [],
        ...(exact === undefined
          ? {}
          : {
              tokens: () => {
                const candidateTokens = exact.count(canonicalJson(candidate, { compact: true }));
                return { raw: exact.count(canonicalJson(raw, { compact: true })), candidate: candidateTokens };
              },
            }),
      });
      return verdict.accepted ? candidate : compiled;
    }
  });
}
