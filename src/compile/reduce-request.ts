/**
 * What compileRequest (operators/compile-request.ts) does with one request that has a history: its
 * options and their validation, the plan–gate–deliver loop (a refused new batch and gone artifacts
 * each re-plan once), the dangling deltas a rewrite leaves, and the working-state block.
 */
import { STAGES } from '../stages.js';
import { PRICING_PROFILES, pricingFor, validateProfile, type PricingProfile } from '../config/pricing.js';
import { readRequest, withItems, writeSlots } from '../model/index.js';
import { canonicalJson, serializedChars } from '../measure/index.js';
import type { WorkingStateStore } from '../vault/ports.js';
import { workingStateBlock } from './working-state-block.js';
import {
  advance,
  note,
  sessionStateKey,
  storeScope,
  type Decision,
  type ProviderRequest,
  type RequestFormat,
  type Step,
} from '../step.js';
import type { ArtifactStore, LeaseStore, SessionStore } from '../vault/ports.js';
import { acceptCandidate } from '../accept.js';
import { gate } from './apply.js';
import type { ConversationMemo, RequestMarks } from './conversation.js';
import { planHistory, type HistoryPlan } from './history.js';
import { managedOutputs, observationSlots, observationTest, type ObservationSetting } from './observations.js';
import { firstOutput, mayBeDelta, resolveDanglingDeltas } from './references.js';
import { sharedLead, type Recognised, type Recognitions } from '../model/prefix.js';
import type { RequestView, Slot } from '../model/types.js';
import { prefixRecognitionOption, recognitionsOption, type RequestStageOptions, type SessionState } from './session.js';
import { checkOptions, intOption, requireVault } from '../options.js';
import { CONFIG_DEFAULTS, defaultInt, type Config } from '../config/index.js';

const STAGE = STAGES.compileRequest;

/** Options of {@link compileRequest}. A "turn" is one model round (a step: see docs/cache-policy.md). */
export interface CompileRequestOptions extends RequestStageOptions {
  /** Where rewritten outputs are vaulted and the conversation's decisions are mirrored. Required. */
  readonly vault: ArtifactStore & LeaseStore & SessionStore;
  /** Old outputs at least this long may be digested (≥ 100). @defaultValue `600` (config `contextMinVaultChars`) */
  readonly minVaultChars?: number;
  /** Longer outputs cannot be vaulted and stay inline (≥ 1). @defaultValue `2_000_000` (config `maxArtifactChars`) */
  readonly maxArtifactChars?: number;
  /** Outputs of the newest turns are never rewritten (≥ 1). @defaultValue `1` (config `contextInlineRecentTurns`) */
  readonly inlineRecentTurns?: number;
  /** Requests that must have shown an output before it is rewritten (1 … 100). @defaultValue `1` (`inlineLeases`) */
  readonly inlineLeases?: number;
  /**
   * 0: history is rewritten when the cache-economic rule says the batch pays for the cache it
   * breaks; n ≥ 1: the fixed-block policy, everything old enough is rewritten whenever the turn
   * count crosses a multiple of n.
   *
   * @defaultValue `0` (config `contextBlockTurns`)
   */
  readonly blockTurns?: number;
  /** Requests the rule expects after this one; 0 = as many as so far. @defaultValue `0` (`rewriteHorizonRequests`) */
  readonly requestsAhead?: number;
  /**
   * When an old output may become a digest: `working-set` once the agent has not referred to it
   * for `workingSetIdleTurns` turns (the expected recoveries priced into the rewrite rule),
   * `lazy` from the request after it was shown.
   *
   * @defaultValue `'working-set'` (config `historyPolicy`)
   */
  readonly historyPolicy?: 'working-set' | 'lazy';
  /**
   * Idle turns before the working-set policy lets an output become a digest (≥ 1), raised for a
   * session that comes back to what it let go.
   *
   * @defaultValue `1` (config `workingSetIdleTurns`)
   */
  readonly workingSetIdleTurns?: number;
  /**
   * The route's prompt-cache pricing, fixed or chosen per request.
   *
   * @defaultValue by route: `route.pricing`, else Anthropic-style for Claude/Anthropic routes, OpenAI-style otherwise
   */
  readonly pricing?: PricingProfile | ((step: Step<ProviderRequest>) => PricingProfile);
  /** Budget of the failure lines a digest keeps (code points, ≥ 0). @defaultValue `400` (config `digestDiagnosticChars`) */
  readonly digestDiagnosticChars?: number;
  /** Opt-in: old assistant prose outside fenced command blocks becomes a receipt. @defaultValue `false` */
  readonly reasoning?: boolean;
  /**
   * Opt-in turn collapse: outputs of turns older than this become bare receipts and their
   * reasoning is reduced; the prefix, user messages and actions stay; 0 = off.
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
   * Budget of the working-state block; 0 = off. With a `workingState` store, the session's block is
   * appended to the last user text of a request this stage reduced, kept only if the whole request
   * stays strictly smaller.
   *
   * @defaultValue `0` (config `workingGraphChars`)
   */
  readonly workingGraphChars?: number;
  /** Where the working state lives (the store behind working_state_apply / _get). @defaultValue none */
  readonly workingState?: WorkingStateStore;
}

/** The validated options of {@link compileRequest} with their defaults (`minChars` is `minVaultChars`). */
export interface CompileSettings {
  readonly options: CompileRequestOptions;
  readonly minChars: number;
  readonly maxArtifactChars: number;
  readonly inlineRecentTurns: number;
  readonly inlineLeases: number;
  readonly blockTurns: number;
  readonly requestsAhead: number;
  readonly historyPolicy: 'working-set' | 'lazy';
  readonly workingSetIdleTurns: number;
  readonly digestDiagnosticChars: number;
  readonly collapseAfterTurns: number;
  readonly workingGraphChars: number;
  readonly isObservation: ReturnType<typeof observationTest>;
  readonly fixedPricing: PricingProfile | undefined;
  readonly prefixRecognition: boolean;
  readonly recognitions: { readonly recognitions?: Recognitions };
}

/**
 * The integer options of {@link compileRequest}, in the options' order: the setting each fills, the
 * config default, the least and greatest value allowed.
 */
const INT_OPTIONS = [
  ['minVaultChars', 'minChars', 'contextMinVaultChars', 100],
  ['maxArtifactChars', 'maxArtifactChars', 'maxArtifactChars', 1],
  ['inlineRecentTurns', 'inlineRecentTurns', 'contextInlineRecentTurns', 1],
  ['inlineLeases', 'inlineLeases', 'inlineLeases', 1, 100],
  ['blockTurns', 'blockTurns', 'contextBlockTurns', 0],
  ['requestsAhead', 'requestsAhead', 'rewriteHorizonRequests', 0],
  ['workingSetIdleTurns', 'workingSetIdleTurns', 'workingSetIdleTurns', 1],
  ['digestDiagnosticChars', 'digestDiagnosticChars', 'digestDiagnosticChars', 0],
  ['collapseAfterTurns', 'collapseAfterTurns', 'contextCollapseAfterTurns', 0],
  ['workingGraphChars', 'workingGraphChars', 'workingGraphChars', 0],
] as const satisfies readonly (readonly [
  keyof CompileRequestOptions,
  keyof CompileSettings,
  keyof Config,
  number,
  number?,
])[];

type IntSetting = (typeof INT_OPTIONS)[number][1];

/** Validate {@link compileRequest}'s options (errors name the operator); the settings with their defaults. */
export function compileSettings(options: CompileRequestOptions): CompileSettings {
  requireVault(STAGE, options);
  const ints = {} as Record<IntSetting, number>;
  for (const [name, setting, key, min, max] of INT_OPTIONS) {
    // At least 1 lease, whatever the config says.
    const fallback = name === 'inlineLeases' ? Math.max(1, defaultInt(key)) : defaultInt(key);
    ints[setting] = intOption(STAGE, name, options[name] as number | undefined, fallback, min, max);
  }
  const historyPolicy = options.historyPolicy ?? (CONFIG_DEFAULTS.historyPolicy as 'working-set' | 'lazy');
  checkOptions(
    STAGE,
    historyPolicy === 'working-set' || historyPolicy === 'lazy',
    "options.historyPolicy must be 'working-set' or 'lazy'",
  );
  checkOptions(
    STAGE,
    ints.collapseAfterTurns === 0 || ints.collapseAfterTurns >= ints.inlineRecentTurns,
    'options.collapseAfterTurns must be 0 or ≥ options.inlineRecentTurns',
  );
  const isObservation = observationTest(STAGE, options.observations);
  const fixedPricing =
    typeof options.pricing === 'object' ? validateProfile(`${STAGE}: options.pricing`, options.pricing) : undefined;
  const prefixRecognition = prefixRecognitionOption(STAGE, options);
  const recognitions = recognitionsOption(STAGE, options);
  return {
    options,
    ...ints,
    historyPolicy,
    isObservation,
    fixedPricing,
    prefixRecognition,
    recognitions,
  };
}

/** One request with a history: plan, gate and deliver its history's rewrites (both re-plans in one loop). */
export async function reduceRequest(
  step: Step<ProviderRequest>,
  state: SessionState,
  seen: Recognised,
  memo: ConversationMemo,
  s: CompileSettings,
): Promise<Step<ProviderRequest> | undefined> {
  const sessionId = step.context.sessionId;
  const view = seen.view;
  const raw: ProviderRequest = seen.request;
  const scope = storeScope(step.context);
  state.evidence.begin(scope);
  // The recovery tool's results are what the model asked for: never rewritten or receipted.
  const outputs = managedOutputs(view, s.isObservation, state.observations);
  const pricing = pricingOf(step, view, s);
  // Delivery is the commit point: a gone artifact is forgotten and the history planned once more
  // (its content vaulted again from the request); if that still fails, the request passes through.
  let newBatch = true;
  let replannedForGone = false;
  for (;;) {
    const plan = await planHistory(state, memo, view, outputs, {
      ...s,
      newBatch,
      sessionId,
      reasoning: s.options.reasoning === true,
      pricing: pricing ?? PRICING_PROFILES.openai,
    });
    if (plan === undefined) return undefined;
    // One vault transaction for what the request decided (not one per output shown or rewritten).
    const markShown = async (rewritten: RequestMarks['rewritten'] = [], full: string[] = []): Promise<void> => {
      const shown = full.length === 0 ? plan.shown : [...plan.shown, ...full];
      const write = memo.markRequest(plan.requestKey, { shown, rewritten }, scope);
      if (write !== undefined) await write;
    };
    const vaultNote = vaultNoteOf(plan);
    if (plan.items === view.items) {
      await markShown();
      return plan.failed > 0 ? note(step, vaultNote) : undefined;
    }
    // A rewrite must not leave a delta pointing at an output it just hid.
    const { items, resolved } = await withoutDanglingDeltas(state, s, raw, view, outputs, plan.items);
    const measured = gate(state, raw, view, items, plan.receipts);
    if (!measured.verdict.accepted) {
      // A new batch that does not pay must not take the earlier renderings down with it (the raw
      // request would void the provider's cached prefix): plan again with the earlier ones only.
      if (plan.batch && newBatch) {
        newBatch = false;
        continue;
      }
      await markShown();
      return note(step, { stage: STAGE, kind: 'skipped', reason: measured.verdict.reason });
    }
    const artifacts = namedArtifacts(state, plan.receipts);
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
    const full = resolved.flatMap((r) => plan.fullShown(JSON.stringify(r.slot.path)) ?? []);
    await markShown(plan.decided, full);
    const request = seen.restore(
      await withWorkingState(s, raw, measured.request, sessionStateKey(step.context), view.format),
    );
    if (plan.failed > 0) step = note(step, vaultNote);
    return advance(step, request, appliedDecision(plan, measured, artifacts));
  }
}

/** The block rides only on savings: the candidate must stay strictly smaller than the caller's request. */
async function withWorkingState(
  s: CompileSettings,
  raw: ProviderRequest,
  compiled: ProviderRequest,
  /** The session's {@link sessionStateKey}: the block is its tenant's working state only. */
  stateKey: string,
  format: RequestFormat,
): Promise<ProviderRequest> {
  if (s.workingGraphChars === 0 || s.options.workingState === undefined) return compiled;
  const block = await workingStateBlock(s.options.workingState, stateKey, s.workingGraphChars);
  if (block === '') return compiled;
  const view = readRequest(compiled, { format });
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
  const exact = s.options.counter?.exact === true ? s.options.counter : undefined;
  const count = (r: ProviderRequest): number => exact!.count(canonicalJson(r, { compact: true }));
  const verdict = acceptCandidate({
    rawChars: serializedChars(raw),
    candidateChars: serializedChars(candidate),
    receipts: [],
    ...(exact === undefined ? {} : { tokens: () => ({ candidate: count(candidate), raw: count(raw) }) }),
  });
  return verdict.accepted ? candidate : compiled;
}

const AUTO_PRICING = {
  pricingProfile: 'auto',
  cacheReadMultiplier: undefined,
  cacheWriteMultiplier: undefined,
  minCachePrefixTokens: undefined,
} as const;

/** The route's prompt-cache pricing for this request (fixed, chosen per request, or by route). */
function pricingOf(step: Step<ProviderRequest>, view: RequestView, s: CompileSettings): PricingProfile | undefined {
  if (s.fixedPricing !== undefined) return s.fixedPricing;
  if (typeof s.options.pricing === 'function') return s.options.pricing(step);
  return pricingFor(AUTO_PRICING, step.context.route, view.format);
}

/** An output that may be a temporal delta (the test of {@link withoutDanglingDeltas}). */
const mayBeDeltaSlot = (o: Slot): boolean => mayBeDelta(o.value);

/** The rewritten items with the deltas whose base a rewrite hid resolved, and those resolutions. */
async function withoutDanglingDeltas(
  state: SessionState,
  s: CompileSettings,
  raw: ProviderRequest,
  view: RequestView,
  outputs: readonly Slot[],
  planned: readonly unknown[],
): Promise<{ readonly items: readonly unknown[]; readonly resolved: readonly { slot: Slot; text: string }[] }> {
  // Renderings are never deltas: without a delta among the request's outputs there is none to resolve.
  if (firstOutput(state.memo, outputs, mayBeDeltaSlot) < 0) return { items: planned, resolved: [] };
  const rewritten = withItems(raw, view.listKey!, planned);
  const again = readRequest(rewritten, { format: view.format });
  const { resolved } = await resolveDanglingDeltas(state, again, [
    ...again.slots.filter((s) => s.kind === 'tool_output'),
    ...observationSlots(again, s.isObservation, state.observations),
  ]);
  if (resolved.length === 0) return { items: planned, resolved };
  const items = writeSlots(
    rewritten,
    resolved.map((r) => ({ path: r.slot.path, value: r.text })),
  )[view.listKey!] as unknown[];
  return { items, resolved };
}

/** The distinct artifacts `receipts` name, in order: the last request's go on while its receipts lead these (the same objects). */
function namedArtifacts({ memo }: SessionState, receipts: readonly { readonly artifactId: string }[]): string[] {
  const last = memo.named;
  const carried = last !== undefined && sharedLead(receipts, last.receipts, undefined) === last.receipts.length;
  const ids = carried ? last.ids : new Set<string>();
  for (let i = carried ? last.receipts.length : 0; i < receipts.length; i++) ids.add(receipts[i]!.artifactId);
  memo.named = { receipts: receipts.slice(), ids };
  return [...ids];
}

/** The note of rewrites left inline because the vault could not store their artifact. */
const vaultNoteOf = (plan: HistoryPlan): Decision => ({
  stage: STAGE,
  kind: 'failed_open',
  reason: `${plan.failed} rewrite(s) left inline: the vault could not store their artifact`,
  error: plan.failure ?? 'Error',
});

/** The applied decision of a delivered plan. */
function appliedDecision(
  plan: HistoryPlan,
  measured: { readonly savedChars: number; readonly savedTokens?: number | undefined },
  artifacts: readonly string[],
): Decision {
  const what = [
    `${plan.rewrittenOutputs} old output(s) digested`,
    ...(plan.reducedReasoning > 0 ? [`${plan.reducedReasoning} reasoning text(s) reduced`] : []),
    ...(plan.batch ? ['new batch'] : []),
  ];
  return {
    stage: STAGE,
    kind: 'applied',
    reason: what.join(', '),
    savedChars: measured.savedChars,
    ...(measured.savedTokens === undefined ? {} : { savedTokens: measured.savedTokens }),
    artifacts,
  };
}
