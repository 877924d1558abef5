/**
 * `createTerminator(options)`: the pipelines (runtime/pipelines.ts) as Observable operators plus
 * Promise facades for adapters and replay.
 *
 * Everything a conversation holds lives in one Session (src/session/session-cache.ts) in one cache
 * of the most recently used sessions; the facades call the stages directly with the call's Session,
 * one call of a kind at a time per session. An evicted session starts afresh; what must survive an
 * eviction or a restart (leases, terminal baselines, sticky renderings) lives in the vault.
 *
 * A vault that cannot be opened is an internal failure, not configuration: by default the
 * Terminator comes up in pass-through mode (see `vaultErrors`) so the host's agent keeps working.
 */
import { createPressure } from '../../operators/cap-output-budget.js';
import { fitForeignMarginPct } from '../../operators/fit-window.js';
import { budgetCounterFrom } from '../budget/counter.js';
import { fallbackPressure } from '../budget/pressure.js';
import { fittedPressure } from '../window/pressure.js';
import { createItemMeasures } from '../ledger/item-measures.js';
import { Recognitions } from '../model/prefix.js';
import { loadConfig, type ConfigOverrides } from '../config/index.js';
import type { Config } from '../config/types.js';
import { ConfigError } from '../errors.js';
import { createCountMemo } from '../ledger/count-memo.js';
import type { TokenCounter } from '../measure/types.js';
import { definedFields, intOption } from '../options.js';
import { createRecoveryTool } from '../recovery/index.js';
import { countReductions, ReductionActivity } from '../activity.js';
import { stageOperator, type Stage } from '../operator-kit.js';
import { SessionCache } from '../session/session-cache.js';
import { HostMemo } from '../session/tool-outputs.js';
import { prepareHost } from './host-path.js';
import { Calls } from './calls.js';
import {
  createStep,
  sessionStateKey,
  storeScope,
  type ProviderRequest,
  type Step,
  type StepContext,
  type ToolCall,
  type ToolResult,
} from '../step.js';
import { createSkillCuts } from '../telemetry/attribution.js';
import { BatchQueue } from '../batch-queue.js';
import { recordedStep, type RecordedStep } from '../telemetry/deferred-records.js';
import { createMessagesMeter } from '../ledger/messages-meter.js';
import { accountRequest, type RequestAccount } from '../telemetry/request-account.js';
import { openLiveLedger, recordRequestMetrics, type LiveLedgerEntry } from '../telemetry/request-record.js';
import { ToolCredits } from '../telemetry/tool-credits.js';
import { ReceiptVerifier } from '../receipts/verify.js';
import type { RequestMetric, Vault, WorkingStateStore } from '../vault/types.js';
import { RunningRequestChars, SESSION_BYTES_PER_CHAR } from '../ledger/request-chars.js';
import { checkWritable, defaultCounter, openReason, openVault, type OpenedVault } from './open-vault.js';
import {
  budgetOptions,
  gateCounter,
  modeGates,
  passThrough,
  passThroughRequests,
  requestPipeline,
  toolCallPipeline,
  toolResultPipeline,
  type PipelineDeps,
} from './pipelines.js';
import { sharedCounts, STORED_MIN_CHARS } from '../ledger/stored-counts.js';
import type { AccountOptions, RecoveryTool, ReduceRequestOptions, Terminator } from './types.js';

export { openLiveLedger, type LiveLedger, type LiveLedgerEntry } from '../telemetry/request-record.js';
export { modeGates, type ModeGates } from './pipelines.js';

export type { RecordRequestOptions, RecoveryTool, ReduceRequestOptions, Terminator } from './types.js';

/** Content-hash entries of the Terminator's shared measurement memo (all sessions; LRU). */
const SHARED_MEASURES = 65_536;

/** Options of {@link createTerminator}. Every field is optional. */
export interface TerminatorOptions {
  /** A complete, validated Config. @defaultValue `loadConfig({ env, overrides })` */
  readonly config?: Config;
  /** Environment to read when `config` is absent. @defaultValue `process.env` */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Field overrides applied over the environment when `config` is absent. @defaultValue none */
  readonly overrides?: ConfigOverrides;
  /**
   * Use this vault instead of opening the configured one. The caller keeps ownership: `close()` leaves it open.
   *
   * @defaultValue a vault the Terminator opens from `vaultOptionsFromConfig(config)` and closes itself
   */
  readonly vault?: Vault;
  /**
   * Token counter.
   *
   * @defaultValue tokenizer.json when configured, else tiktoken (configured encoding, else o200k_base)
   */
  readonly counter?: TokenCounter;
  /** Sessions whose state stays held (least recently used are dropped). @defaultValue 256 */
  readonly maxSessions?: number;
  /**
   * Bytes of per-session request state held over all sessions, each session estimated at
   * `SESSION_BYTES_PER_CHAR` (src/ledger/request-chars.ts; `npm run bench -- memory`) bytes per
   * character of its latest request. Past it the least recently used sessions are dropped (not the
   * one in use); a dropped session rebuilds its state from its next request and the vault.
   *
   * @defaultValue unbounded (only `maxSessions` bounds them)
   */
  readonly maxSessionBytes?: number;
  /**
   * Record a content-free metrics row per `reduceRequest` call in the vault (sizes, tokens, savings
   * per stage, component attribution).
   *
   * @defaultValue true
   */
  readonly metrics?: boolean;
  /**
   * What happens when the vault at `config.dbPath` cannot be opened (corrupt file, not a database,
   * a path below a regular file, an unwritable directory, a lock held past the busy timeout, a
   * newer schema). Ignored when `vault` is given; bad configuration always throws (ConfigError).
   * - `'passthrough'` (default): the Terminator comes up in pass-through mode for its lifetime:
   *   every Step passes through unchanged with a `failed_open` decision (stage `runtime`, reason
   *   `vault_unavailable`, error `VaultOpenError:E_VAULT_OPEN`), the recovery tool's `status`
   *   reports `vault_available: false` and its other actions answer that error as `{code, message}`.
   *   One line on stderr says so, once per Terminator (path and reason code only).
   * - `'throw'`: `createTerminator` rejects with the VaultOpenError (or VaultSchemaError).
   *
   * @defaultValue `'passthrough'`
   */
  readonly vaultErrors?: 'passthrough' | 'throw';
  /**
   * Write the content-free experiment ledger (`token-terminator compare`) for every compiled
   * request: the session tagged with its mode and model, one turn per request with the tokens sent
   * (raw and final, counted with the runtime's counter) and the user text's salted fingerprint. The
   * file is TOKEN_TERMINATOR_LEDGER_PATH, else `experiments.sqlite3` beside the vault.
   *
   * @defaultValue TOKEN_TERMINATOR_LEDGER (true) when this Terminator opened its own vault file; off
   * for a vault passed in, an in-memory vault, or pass-through mode
   */
  readonly ledger?: boolean;
  /**
   * Most answered requests whose deferred telemetry (metrics row, ledger turn) may wait, each
   * holding a snapshot of its message lists; a call that finds this many waits for the telemetry
   * to catch up (nothing is dropped), so sustained load cannot grow memory without bound.
   *
   * @defaultValue 32
   */
  readonly telemetryBacklog?: number;
  /**
   * Most weight (`AccountOptions.weight`: the gateway weighs a request by its bodies' bytes) of
   * answered requests whose telemetry may wait, beside `telemetryBacklog`.
   *
   * @defaultValue unbounded
   */
  readonly telemetryBacklogWeight?: number;
}

/**
 * Build a Terminator: loads the config, opens the vault, picks the counter, wires the pipelines.
 * Throws for bad configuration (ConfigError); a vault that cannot be opened yields a pass-through
 * Terminator, or rejects with a VaultOpenError when `vaultErrors: 'throw'`.
 *
 * @example
 * await using tt = await createTerminator({ overrides: { dbPath: '/tmp/tt.sqlite3' } });
 * const step = await tt.reduceToolResult(result, { sessionId: 's1' });
 * host.transcript.push(step.value.content);
 */
export async function createTerminator(options: TerminatorOptions = {}): Promise<Terminator> {
  return facade(await openParts(options));
}

/** What the Terminator is built over: its config, vault, counter, pipelines and telemetry. */
type FacadeParts = Awaited<ReturnType<typeof openParts>>;

async function openParts(options: TerminatorOptions) {
  const config =
    options.config ??
    loadConfig({
      ...(options.env === undefined ? {} : { env: { ...options.env } }),
      overrides: options.overrides ?? {},
    });
  const vaultErrors = options.vaultErrors ?? 'passthrough';
  if (vaultErrors !== 'passthrough' && vaultErrors !== 'throw') {
    throw new ConfigError(
      `createTerminator: vaultErrors must be 'passthrough' or 'throw' (got ${String(vaultErrors)})`,
    );
  }
  const maxSessions = intOption('createTerminator', 'maxSessions', options.maxSessions, 256, 1);
  const maxSessionBytes =
    options.maxSessionBytes === undefined
      ? Number.POSITIVE_INFINITY
      : intOption('createTerminator', 'maxSessionBytes', options.maxSessionBytes, 0, 1);
  const telemetryBacklog = intOption('createTerminator', 'telemetryBacklog', options.telemetryBacklog, 32, 1);
  const activity = new ReductionActivity();
  const opened = await openVault(config, options.vault, vaultErrors, activity);
  let counter: TokenCounter;
  try {
    counter = options.counter ?? defaultCounter(config);
  } catch (error) {
    if (opened.owns) await opened.vault.close();
    throw error;
  }
  const store = await checkWritable(opened, vaultErrors);
  const { vault, failure } = store;
  const ownsCounter = options.counter === undefined;
  const sessions = new SessionCache(maxSessions, maxSessionBytes);
  const wired = wirePipelines(config, store, counter, sessions);
  const recordMetrics = options.metrics !== false && failure === undefined;
  const ledger = openLiveLedger(
    config,
    (options.ledger ?? (config.ledger && store.owns)) && failure === undefined && vault.path !== ':memory:',
    activity,
  );
  // The meter reads the shared item measures and counts little itself; a counter the host brings
  // (maybe slow or remote) gets a content memo for that.
  const meter = createMessagesMeter(ownsCounter ? counter : createCountMemo(counter, { maxEntries: 8192 }), {
    measures: wired.measures,
  });
  // The tool outputs this Terminator reduced, in their sessions: what each request showing them saved (src/telemetry/tool-credits.ts).
  const credits = new ToolCredits(sessions);
  return {
    config,
    store,
    counter,
    ownsCounter,
    meter,
    wired,
    credits,
    ledger,
    recordMetrics,
    sessions,
    maxSessionBytes,
    // The reductions in flight, which the vault the Terminator opens waits for (src/activity.ts).
    activity,
    // Bounds of the answered requests waiting for their records (`telemetryBacklog`, `telemetryBacklogWeight`).
    backlog: { maxPending: telemetryBacklog, ...definedFields({ maxPendingWeight: options.telemetryBacklogWeight }) },
  };
}

/** The pipelines' shared parts: gates, the per-item measurement memo, shared counts, the prompt counter. */
function wirePipelines(config: Config, store: OpenedVault, counter: TokenCounter, sessions: SessionCache) {
  const { vault, failure } = store;
  const gates = modeGates(config);
  // The working-state graph lives in the vault (same connection), only when its budget is on.
  const workingState = config.workingGraphChars > 0 && failure === undefined ? vault.workingState : undefined;
  // One measurement memo per item for every session's stages, output cap and telemetry: each item
  // serialized once, each text tokenized once (src/ledger/item-measures.ts). It records the pieces
  // of the compact JSON it counts, from which the telemetry meter derives its spaced segments.
  const recognitions = new Recognitions();
  const measures = createItemMeasures({
    counter,
    recognitions,
    maxEntries: SHARED_MEASURES,
    recordPieces: true,
    trackCounted: STORED_MIN_CHARS,
  });
  const counts = failure === undefined ? sharedCounts(vault, measures) : undefined;
  const budgetCounter = budgetCounterFrom(counter, { identityCache: true, measures, recognitions });
  const deps: PipelineDeps = {
    config,
    vault,
    counter,
    budgetCounter,
    measures,
    recognitions,
    gate: gateCounter(counter, gates),
    gates,
    focus: (step) => sessions.peek(step.context)?.focus ?? [],
    ...(workingState === undefined ? {} : { workingState }),
  };
  return { deps, measures, counts, budgetCounter };
}

function recoveryToolOf(config: Config, store: OpenedVault, workingState: WorkingStateStore | undefined): RecoveryTool {
  const { vault, failure } = store;
  return createRecoveryTool(
    failure === undefined
      ? { vault, config, health: () => vault.health(), ...(workingState === undefined ? {} : { workingState }) }
      : store.readOnly
        ? { vault, config, health: () => vault.health(), status: async () => ({ passthrough: true, read_only: true }) }
        : { vault, config, status: async () => ({ passthrough: true, vault_open_reason: openReason(failure) }) },
  );
}

/** One answered request waiting for its record: its Step as sent, and what {@link AccountOptions} adds. */
type Deferred = RecordedStep & Pick<AccountOptions, 'raw' | 'weight' | 'measured'>;

/**
 * The metrics row and the ledger turn of each answered request, recorded after the call returned,
 * for every host (the gateway's requests too: {@link Terminator.account}). A batch's ledger turns
 * go in one transaction, and its metrics rows too (a row the store refuses loses only itself).
 */
function deferredRecords(parts: FacadeParts): BatchQueue<Deferred> {
  const { meter, config, recordMetrics, ledger, credits } = parts;
  const { vault } = parts.store;
  const { counts } = parts.wired;
  // The Terminator's instructions cut into skill blocks, by object (what attribution measures apart).
  const skillCuts = createSkillCuts();
  const verifier = new ReceiptVerifier(vault);
  const accounting = {
    meter,
    mode: config.mode,
    credits,
    skillCuts,
    receipts: (list: readonly unknown[]) => verifier.referenced(list).length,
    toolLists: new WeakMap<readonly unknown[], readonly unknown[]>(),
  };
  return new BatchQueue<Deferred>(
    async (batch) => {
      const turns: LiveLedgerEntry[] = [];
      const metrics: RequestMetric[] = [];
      for (const [i, step] of batch.entries()) {
        // Between two requests' measuring, whatever arrived meanwhile (a new call) goes first.
        if (i > 0) await new Promise<void>((resolve) => setImmediate(resolve));
        let account: RequestAccount;
        try {
          account = accountRequest(accounting, {
            context: step.context,
            staged: step.original,
            ...(step.raw === undefined ? {} : { raw: step.raw }),
            sent: step.value,
            continuations: step.continuations ?? [],
            decisions: step.decisions,
          });
        } catch (error) {
          // Telemetry never fails the call.
          step.measured?.({ error });
          continue;
        }
        step.measured?.({ account });
        if (recordMetrics) metrics.push(account.row);
        const turn = step.raw === undefined ? step : { context: step.context, original: step.raw };
        turns.push({ step: turn, rawTokens: account.rawTokens, finalTokens: account.finalTokens });
      }
      await recordRequestMetrics(vault, metrics);
      await ledger?.recordAll(turns);
      // What telemetry tokenized (the spaced segments) goes to the count store too.
      counts?.written();
    },
    { ...parts.backlog, weigh: (step) => step.weight ?? 0 },
  );
}

/** The three pipelines, each passing everything through when the vault failed. */
type Pipelines = ReturnType<typeof pipelinesOf>;

function pipelinesOf(deps: PipelineDeps, failure: Error | undefined) {
  return failure === undefined
    ? { tool_call: toolCallPipeline(deps), tool_result: toolResultPipeline(deps), request: requestPipeline(deps) }
    : {
        tool_call: passThrough<ToolCall>(failure),
        tool_result: passThrough<ToolResult>(failure),
        request: passThroughRequests(deps, failure),
      };
}

/** Account a session at its latest request's estimated bytes (under a `maxSessionBytes` bound only). */
function accountSession(parts: FacadeParts, context: StepContext, request: ProviderRequest): void {
  if (parts.maxSessionBytes === Number.POSITIVE_INFINITY || !parts.sessions.has(context)) return;
  const session = parts.sessions.of(context);
  const size = (session.sized ??= new RunningRequestChars()) as RunningRequestChars;
  // The host path's items and renderings are held as strings and objects (about two bytes a character).
  const held = size.measure(request, parts.wired.measures) * SESSION_BYTES_PER_CHAR + (session.host?.chars ?? 0) * 2;
  parts.sessions.account(session, held);
}

/** The pipelines opened once for the Promise facades, each call run by `calls` with its Session. */
function directCalls(pipelines: Pipelines, calls: Calls) {
  const runs = {
    tool_call: pipelines.tool_call.open(),
    tool_result: pipelines.tool_result.open(),
    request: pipelines.request.open(),
  };
  return {
    toolCall: (step: Step<ToolCall>) => calls.run('tool_call', runs.tool_call, step),
    toolResult: (step: Step<ToolResult>) => calls.run('tool_result', runs.tool_result, step),
    request: (step: Step<ProviderRequest>) => calls.run('request', runs.request, step),
    async close(): Promise<void> {
      calls.close();
      for (const run of Object.values(runs)) await Promise.resolve(run.close?.()).catch(() => undefined);
    },
  };
}

/** The Terminator over its parts: the operators, the Promise facades on their lanes, and closing. */
function facade(parts: FacadeParts): Terminator {
  const { config, counter, meter, ledger, sessions } = parts;
  const { vault, failure } = parts.store;
  const { deps, counts } = parts.wired;
  const records = deferredRecords(parts);
  const budget = budgetOptions(config, parts.wired.budgetCounter);
  let pressureFn: ReturnType<typeof createPressure> | undefined;
  let closed = false;
  const pipelines = pipelinesOf(deps, failure);
  const calls = directCalls(pipelines, new Calls(sessions, parts.activity));
  // The operator face: each subscription opens its own run with its own sessions.
  const operator = <T>(stage: Stage<T>) =>
    failure !== undefined ? stageOperator(stage) : countReductions(parts.activity, stageOperator(stage));
  /** The call's context with its own lock budget: every stage of this call draws from one busy timeout. */
  const withBudget = (context: StepContext): StepContext =>
    context.lockBudget !== undefined ? context : { ...context, lockBudget: { remainingMs: config.busyTimeoutMs } };
  // This Terminator keeps records of its own (metrics rows, ledger turns).
  const recording = parts.recordMetrics || ledger !== undefined;
  const settled = (): Promise<void> => records.settled();
  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    await calls.close();
    // The records still waiting read their sessions' tool credits: the sessions go after them.
    await settled();
    sessions.clear();
    // The counts the calls and their telemetry tokenized, written now rather than at their timer.
    await counts?.settled();
    await ledger?.close();
    await pressureFn?.close().catch(() => undefined);
    if (parts.ownsCounter) counter.dispose?.();
    if (parts.store.owns) await vault.close();
  };
  const account = (step: Step<ProviderRequest>, recorded: AccountOptions = {}): void => {
    if ((!recording && recorded.measured === undefined) || closed) return;
    const { sent, continuations, ...extra } = recorded;
    records.add({ ...recordedStep(step, sent, continuations), ...extra });
  };
  const reduceRequest = async (
    request: ProviderRequest,
    context: StepContext,
    signal?: AbortSignal,
    options?: ReduceRequestOptions,
  ): Promise<Step<ProviderRequest>> => {
    if (records.full) await records.room();
    if (!closed) await counts?.prefetch(request, sessions.of(context));
    const out = await calls.request(createStep(request, withBudget(context), signal));
    accountSession(parts, context, request);
    if (options?.record !== false) account(out);
    if (!closed) counts?.written();
    return out;
  };
  return {
    config,
    vault,
    counter,
    meter,
    digests: parts.wired.measures.digests,
    passThrough: failure !== undefined && !parts.store.readOnly,
    toolCalls: () => operator(pipelines.tool_call),
    toolResults: () => operator(pipelines.tool_result),
    requests: () => operator(pipelines.request),
    reduceToolCall: (call, context, signal) => calls.toolCall(createStep(call, context, signal)),
    reduceToolResult: async (result, context, signal) => {
      const step = await calls.toolResult(createStep(result, withBudget(context), signal));
      // A malformed result (not an object) passes as it came: the facade never throws for content.
      const shown = (step.value as Partial<ToolResult> | null | undefined)?.content;
      const raw = (result as Partial<ToolResult> | null | undefined)?.content;
      // For this Terminator's own records (a host measuring itself has the raw outputs in its requests).
      if (recording && typeof shown === 'string' && typeof raw === 'string' && shown !== raw)
        parts.credits.note(sessionStateKey(context), shown, raw, step.decisions);
      return step;
    },
    reduceRequest,
    // `this`: a host's view of the Terminator (a wrapper over its facades) prepares through that view.
    prepare(this: Terminator, options) {
      const session = sessions.of(options.context);
      return prepareHost(this, options, (session.host ??= new HostMemo()));
    },
    account,
    accountingRoom: () => (records.full ? records.room() : undefined),
    toolCredits: parts.credits,
    pressure: async (request, context) => {
      try {
        const fn = (pressureFn ??= createPressure(budget));
        const pressure = await fn(request, context);
        // With the window fit on, the host compacts only when the fit cannot make room (docs/window.md).
        if (!modeGates(config).compiler || !config.windowFit) return pressure;
        return await fittedPressure(request, {
          limits: fn.limits(request, context),
          pressure,
          count: (r) => fn.count(r, context),
          lowWaterPct: config.windowLowWaterPct,
          context,
          // The margin the pipeline's fit applies (same counter and budget options as it).
          foreignMarginPct: fitForeignMarginPct({ counter, budget }),
        });
      } catch {
        return fallbackPressure(config, counter, request, context);
      }
    },
    heldState: (context) => ({
      sessions: sessions.size,
      bytes: sessions.bytes,
      // Its Session, the host path's memo and the tool credits in it.
      ...(context === undefined ? {} : { entries: sessions.entries(context) }),
    }),
    endSession: async (context) => {
      sessions.end(context);
      if (failure !== undefined) return;
      try {
        await vault.closeSession(storeScope(withBudget(context)));
      } catch {
        // The pins then age out with the session TTL instead.
      }
    },
    recoveryTool: recoveryToolOf(config, parts.store, deps.workingState),
    settled,
    close,
    [Symbol.asyncDispose]: close,
  };
}
