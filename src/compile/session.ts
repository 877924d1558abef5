/**
 * Per-session state of a request stage, held by its Session (src/session/session-cache.ts): the meter, the evidence store,
 * the render memo, the conversation's chain hashes and the previous request (src/model/prefix.ts).
 * What must outlive it (artifacts, leases, pins) is in the vault.
 */
import { LRUCache } from 'lru-cache';
import type { TokenCounter } from '../measure/types.js';
import type { ArtifactStore, LeaseStore, SessionStore } from '../vault/ports.js';
import { requestStore, scopedReads, type RequestStore, type ScopedReads } from '../vault/scoped-reads.js';
import { createChainMemo, type ChainMemo } from './conversation.js';
import { createEvidenceStore, type EvidenceStore, type Receipted } from './evidence.js';
import type { FocusTermsMemo } from './conversation-terms.js';
import type { ItemMeasures } from '../ledger/item-measures.js';
import { createMeter, type Meter } from '../ledger/request-meter.js';
import { createRequestMemo, Recognitions, type RequestMemo } from '../model/prefix.js';
import { createObservationMemo, type ObservationMemo } from './observations.js';
import { createInlineIds, type InlineIds, type OutputScan } from './references.js';
import { createRenderMemo, type RenderMemo } from './render-memo.js';
import { WeakMemo } from '../weak-memo.js';
import type { Rendering } from './apply.js';
import type { DuplicatesCarried, OutputFacts as DuplicateFacts } from './duplicates.js';
import type { SessionPast, SettledRun } from './history.js';
import type { Walk, WordMemo } from './working-set.js';
import type { RequestView, Slot } from '../model/types.js';
import type { Steps } from './steps.js';
import type { NumberedWindow } from '../compact/edit-window.js';
import { checkOptions } from '../options.js';

export interface SessionState {
  readonly meter: Meter;
  readonly evidence: EvidenceStore;
  readonly renders: RenderMemo;
  /** Chain hashes of the conversation's items (which conversation an item belongs to). */
  readonly chain: ChainMemo;
  /** The vault the session's evidence lives in, without reads by id (those go through {@link reads}). */
  readonly vault: RequestStore;
  /**
   * Reads by id, limited to the session's tenant and session: how a stage resolves an id it found
   * in a request (a delta, a reused receipt). An id outside it is unknown.
   */
  readonly reads: ScopedReads;
  /** What the stages carry from one request of the session to the next (see {@link StageMemo}). */
  readonly memo: StageMemo;
  /**
   * What a stage derived per output and may derive again the same way (history digests, receipts
   * verified in the vault): bounded by entries and by characters held, least recently used first,
   * so a long session keeps the renderings of the items its requests still carry, not of all it saw.
   */
  readonly derived: LRUCache<string, Derived>;
  /** Per-item facts a stage derived once (evidence of an item's tool outputs). */
  readonly itemMemo: WeakMemo<object, Map<string, unknown>>;
  /** The previous request's items and view: what recognises the unchanged history of the next one. */
  readonly requests: RequestMemo;
  /** The receipt each history rendering's evidence was vaulted under, or its artifact verified (by the rendering object). */
  readonly targetReceipts: WeakMemo<object, Pick<Receipted, 'artifactId' | 'verified'>>;
  /** Focus terms of each conversation item (src/compile/conversation-terms.ts). */
  readonly focusTerms: FocusTermsMemo;
  /** Artifact ids of the outputs shown inline (src/compile/references.ts). */
  readonly inlineIds: InlineIds;
  /** The last scans for tool outputs and recognised observations (src/compile/observations.ts). */
  readonly observations: ObservationMemo;
}

/** An output slot that prints a numbered file window: its index in the request's outputs, and the window. */
export interface WindowedOutput {
  readonly k: number;
  readonly window: NumberedWindow;
}

/**
 * What a request stage carries from a session's request to its next, each field owned by the
 * module that names it; absent until that stage first needs it.
 */
export interface StageMemo {
  /** planDuplicates: the facts of the previous request's outputs, reused for the same slot objects. */
  dedupeFacts?: readonly DuplicateFacts[];
  /** planDuplicates: its plan of those facts, for a request that extends the previous one. */
  dedupePlan?: DuplicatesCarried;
  /** collapseDuplicates: chain hash of every item the session had → the request that first had it. */
  seen?: Map<string, string>;
  /** collapseDuplicates: chain hashes of the items rendered as a duplicate's receipt. */
  duplicates?: Set<string>;
  /** collapseDuplicates: the state was restored from the vault's mirror. */
  restored?: boolean;
  /** collapseDuplicates: the chain hashes the last request added to `seen`. */
  added?: readonly string[];
  /** planHistory: what the previous plan found per output, and the run of them it settled. */
  settledRun?: SettledRun;
  /** planHistory: the numbered window each output slot prints (null: none), for the same slot objects. */
  editWindows?: WeakMap<Slot, NumberedWindow | null>;
  /** planHistory: the last outputs read for windows (the request's own list), and those that print one (by index). */
  windowed?: { readonly outputs: readonly Slot[]; readonly at: readonly WindowedOutput[] };
  /** planHistory: the outputs rewritten so far and those the agent came back to. */
  past?: SessionPast;
  /** planHistory: the steps of the last request's view (carried to a view extending it). */
  steps?: { readonly view: RequestView; readonly steps: Steps };
  /** idleTurns: per-item word sets. */
  words?: WordMemo;
  /** idleTurns: the walk over the last request's items. */
  walk?: Walk;
  /** receiptsOf: the last request's named renderings and their receipts (aligned). */
  receipted?: { readonly final: object[]; readonly receipts: Pick<Receipted, 'artifactId' | 'verified'>[] };
  /** reduceRequest: the last plan's receipts (a copy) and the distinct artifacts they name, in order. */
  named?: { readonly receipts: readonly object[]; readonly ids: Set<string> };
  /** renderItems: the last renderings to render the next request from. */
  renderings?: Rendering[];
  /** resolveBase, withoutDanglingDeltas: the last scan of the outputs for deltas (src/compile/references.ts firstOutput). */
  outputScan?: OutputScan;
}

/** One derived value and the characters it holds (its share of the bound). */
export interface Derived {
  readonly value: unknown;
  readonly chars: number;
}

/** Bounds of {@link SessionState.derived}: entries, and characters of text held. */
const DERIVED_ENTRIES = 4096;
const DERIVED_CHARS = 8_000_000;

/**
 * {@link SessionState.derived}: an LRU bounded by characters (`maxSize`) and by entries. The entry
 * bound is kept here, not as lru-cache's `max`, which allocates storage for that many entries up
 * front (about 98 KiB for 4,096) in every session's every request stage.
 */
class DerivedCache extends LRUCache<string, Derived> {
  constructor() {
    super({ maxSize: DERIVED_CHARS, sizeCalculation: (d) => Math.max(1, d.chars) });
  }

  override set(key: string, value: Derived, options?: LRUCache.SetOptions<string, Derived, unknown>): this {
    super.set(key, value, options);
    while (this.size > DERIVED_ENTRIES) this.pop();
    return this;
  }
}

/** The options the request stages that keep session states (collapseDuplicates, compileRequest) share. */
export interface RequestStageOptions {
  /** Adds the token half of the acceptance gate when exact. @defaultValue none (characters only) */
  readonly counter?: TokenCounter;
  /**
   * The per-item measurement memo shared with the other request stages, the output-budget counter
   * and telemetry (`createItemMeasures`); read only when it counts with `counter`.
   *
   * @defaultValue none: one of the operator's own per session
   */
  readonly measures?: ItemMeasures;
  /**
   * Recognise the history a session's previous request sent, so only new items take the full path
   * (src/model/prefix.ts); `false` gives the same output the slow way (tests and benchmarks).
   *
   * @defaultValue `true`
   */
  readonly prefixRecognition?: boolean;
  /**
   * Where the stage records the equalities it recognised, for the other stages that read them (the
   * runtime passes its own to each). @defaultValue none: one of the operator's own per subscription
   */
  readonly recognitions?: Recognitions;
}

/** `prefixRecognition` with its default, checked at build time (the error names the operator). */
export function prefixRecognitionOption(stage: string, options: RequestStageOptions): boolean {
  const recognise = options.prefixRecognition ?? true;
  checkOptions(stage, typeof recognise === 'boolean', 'prefixRecognition must be a boolean');
  return recognise;
}

/** `recognitions` when given, checked at build time (the error names the operator). */
export function recognitionsOption(stage: string, options: RequestStageOptions): { recognitions?: Recognitions } {
  const { recognitions } = options;
  if (recognitions === undefined) return {};
  checkOptions(stage, recognitions instanceof Recognitions, 'recognitions must be a Recognitions (new Recognitions())');
  return { recognitions };
}

/**
 * A maker of request-stage states, one per stage run (they share its Recognitions); the Session
 * holds each state (src/session/session-cache.ts). Reads by id are scoped to the Step's tenant
 * (default `''`) and session.
 */
export function sessionStateFactory(
  options: RequestStageOptions & { readonly vault: ArtifactStore & LeaseStore & SessionStore },
): (session: { readonly sessionId: string; readonly tenant?: string }) => SessionState {
  const store = requestStore(options.vault);
  const recognitions = options.recognitions ?? new Recognitions();
  return ({ sessionId, tenant = '' }) => {
    const requests = createRequestMemo({ recognise: options.prefixRecognition ?? true, recognitions });
    const meter = createMeter({
      ...(options.counter === undefined ? {} : { counter: options.counter }),
      ...(options.measures === undefined ? {} : { measures: options.measures }),
      lists: requests.lists,
      recognitions,
    });
    return {
      meter,
      evidence: createEvidenceStore(store, meter.digests),
      renders: createRenderMemo(),
      chain: createChainMemo(requests.lists),
      vault: store,
      reads: scopedReads(options.vault, { tenant, sessionId }),
      memo: {},
      derived: new DerivedCache(),
      itemMemo: new WeakMemo(),
      requests,
      targetReceipts: new WeakMemo(),
      focusTerms: new WeakMemo(),
      inlineIds: createInlineIds(),
      observations: createObservationMemo(),
    };
  };
}
