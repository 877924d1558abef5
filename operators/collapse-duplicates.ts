import { STAGES } from '../src/stages.js';
import type { RequestView } from '../src/model/index.js';
import type { Slot } from '../src/model/types.js';
import { stageOperator, type SessionReducer, type StageOperator } from '../src/operator-kit.js';
import { advance, note, sessionStateKey, storeScope, type ProviderRequest, type Step } from '../src/step.js';
import type { ArtifactStore, LeaseStore, SessionStore } from '../src/vault/ports.js';
import {
  creditedDecisions,
  deliverPlan,
  deltaNotes,
  markDuplicates,
  noteSeen,
  resolveBase,
  sessionHistory,
  unresolvedNotes,
} from '../src/compile/collapse.js';
import { planDuplicates } from '../src/compile/duplicates.js';
import { managedOutputs, observationTest, type ObservationSetting } from '../src/compile/observations.js';
import {
  sessionStateFactory,
  prefixRecognitionOption,
  recognitionsOption,
  type RequestStageOptions,
  type SessionState,
} from '../src/compile/session.js';
import { intOption, requireVault } from '../src/options.js';
import { defaultInt } from '../src/config/index.js';
import type { Recognised } from '../src/model/prefix.js';

const STAGE = STAGES.collapseDuplicates;

/** Options of {@link collapseDuplicates}. */
export interface CollapseDuplicatesOptions extends RequestStageOptions {
  /** Where evidence is vaulted and leases are claimed. Required. */
  readonly vault: ArtifactStore & LeaseStore & SessionStore;
  /** Tool outputs at least this long are managed (≥ 1). @defaultValue `4000` (config `minArtifactChars`) */
  readonly minArtifactChars?: number;
  /** Longer outputs stay inline (≥ `minArtifactChars`). @defaultValue `2_000_000` (config `maxArtifactChars`) */
  readonly maxArtifactChars?: number;
  /** Longer inline outputs show a bounded view plus receipt (0 = never). @defaultValue `32_000` (`maxInlineChars`) */
  readonly maxInlineChars?: number;
  /** Size of that bounded view in code points (≥ 200). @defaultValue `8000` */
  readonly inlineViewChars?: number;
  /** Which user messages of a text-protocol agent are command output. @defaultValue the default pattern */
  readonly observations?: ObservationSetting;
}

/**
 * The first request stage: what the model sees of outputs as they arrive. A temporal delta whose
 * base output is not shown in the request becomes the output it stands for (nothing refers to
 * what the request does not show); an output too large to show whole becomes a bounded faithful
 * view (head, failure lines, tail) plus its receipt; an output that arrived twice with this
 * request is shown once, inline, at its newest copy. Older outputs are left to compileRequest.
 *
 * @example
 * requests$.pipe(collapseDuplicates({ vault, minArtifactChars: 4000 }))
 */
export function collapseDuplicates(options: CollapseDuplicatesOptions): StageOperator<ProviderRequest> {
  requireVault(STAGE, options);
  const minChars = intOption(STAGE, 'minArtifactChars', options.minArtifactChars, defaultInt('minArtifactChars'), 1);
  const maxChars = intOption(
    STAGE,
    'maxArtifactChars',
    options.maxArtifactChars,
    defaultInt('maxArtifactChars'),
    minChars,
  );
  const maxInlineChars = intOption(STAGE, 'maxInlineChars', options.maxInlineChars, defaultInt('maxInlineChars'), 0);
  const viewChars = intOption(STAGE, 'inlineViewChars', options.inlineViewChars, 8000, 200);
  const isObservation = observationTest(STAGE, options.observations);
  prefixRecognitionOption(STAGE, options);
  recognitionsOption(STAGE, options);
  return stageOperator({
    name: STAGE,
    open: () => {
      // The options were checked when the operator was built (prefixRecognition, recognitions).
      const newState = sessionStateFactory(options);
      // The recovery tool's results are what the model asked for: never leased, collapsed or viewed.
      const outputsOf = (view: RequestView, state: SessionState): Slot[] =>
        managedOutputs(view, isObservation, state.observations);
      const settings: Settings = { minChars, maxChars, maxInlineChars, viewChars, outputsOf };
      // Synchronous until a large output or a delta is found, so pass-through Steps emit synchronously.
      const reduce: SessionReducer<ProviderRequest> = (step, session) => {
        // The history the session's previous request had is recognised, not re-read (src/model/prefix.ts).
        const state = (session.collapse ??= newState(step.context));
        const seen = state.requests.recognise(step.value, step.context.format);
        const view = seen.view;
        if (view.listKey === undefined) return undefined;
        const outputs = outputsOf(view, state);
        const relevant = outputs.some(
          (s) =>
            Array.isArray(s.value) ||
            (typeof s.value === 'string' &&
              (s.value.length >= minChars || s.value.startsWith('[Token Terminator temporal delta'))),
        );
        return relevant ? reduceStep(step, state, seen, outputs, settings) : undefined;
      };
      return { reduce };
    },
  });
}

/** The operator's validated options the reduction reads. */
interface Settings {
  readonly minChars: number;
  readonly maxChars: number;
  readonly maxInlineChars: number;
  readonly viewChars: number;
  readonly outputsOf: (view: RequestView, state: SessionState) => Slot[];
}

/** One request with outputs worth managing: resolve dangling deltas, plan, deliver, credit. */
async function reduceStep(
  step: Step<ProviderRequest>,
  state: SessionState,
  recognised: Recognised,
  inputOutputs: readonly Slot[],
  o: Settings,
): Promise<Step<ProviderRequest> | undefined> {
  const sessionId = step.context.sessionId;
  // The session's rendering rows are its tenant's: keyed by both.
  const stateKey = sessionStateKey(step.context);
  const scope = storeScope(step.context);
  state.evidence.begin(scope);
  // Fidelity first: the baseline is the request with every dangling delta resolved.
  const { base, view, outputs, resolved, unresolved } = await resolveBase(state, recognised, inputOutputs, o.outputsOf);
  // Items an earlier request of this conversation had (by chain hash) are not new here.
  const chain = state.chain.hashes(recognised.view.items, (it) => state.meter.measure(it).hash);
  const { isNew, wasDuplicate } = await sessionHistory(state, stateKey, chain);
  const plan = await planDuplicates(state, view, outputs, { ...o, sessionId, isNew, wasDuplicate });
  await noteSeen(state, stateKey, chain, scope);
  const withBase = (): Step<ProviderRequest> => {
    let out = base === recognised.request ? step : advance(step, recognised.restore(base), deltaNotes(resolved)[0]!);
    for (const d of unresolvedNotes(unresolved)) out = note(out, d);
    return out;
  };
  const delivered = await deliverPlan(state, base, view, plan, scope);
  if (delivered.kind === 'none') return base === recognised.request && unresolved === 0 ? undefined : withBase();
  if (delivered.kind === 'skipped')
    return note(withBase(), { stage: STAGE, kind: 'skipped', reason: delivered.reason });
  await markDuplicates(state, stateKey, chain, delivered.managed, scope);
  const [first, second] = creditedDecisions(delivered.managed, delivered.measured);
  const out = advance(withBase(), recognised.restore(delivered.measured.request), first!);
  return second === undefined ? out : note(out, second);
}
