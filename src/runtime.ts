/**
 * `createTerminator(options)`: wires the operators into the two pipelines (tool results, provider requests) and
 * exposes them as Observable operators plus Promise facades for adapters and replay.
 *
 * Facade state: the operators keep per-subscription state (the request stream's memo and sticky
 * renderings, the rewrite cache). Re-subscribing per call would throw that away on every request,
 * so each facade keeps ONE long-lived subscription per (pipeline, session) — a "lane" — and pushes
 * every call of that session through it. Lanes are kept for the most recently used sessions only
 * (LRU, `maxSessions`); an evicted session simply starts a new lane, and what must survive an
 * eviction or a restart (leases, terminal baselines, sticky renderings) lives in the vault.
 *
 * A vault that cannot be opened is not configuration but an internal failure, so by default the
 * Terminator still comes up, in pass-through mode (see `vaultErrors`): the host's agent keeps
 * working with its original content instead of failing to start.
 */
import { randomUUID } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { Subject, identity, type OperatorFunction, type Subscription } from 'rxjs';
import { capOutputBudget, createPressure } from '../operators/cap-output-budget.js';
import { compileRequest } from '../operators/compile-request.js';
import { budgetCounterFrom, type BudgetCounter } from './budget/counter.js';
import { compressToolResult } from '../operators/compress-tool-result.js';
import { collapseDuplicates } from '../operators/collapse-duplicates.js';
import { routeSkills } from '../operators/route-skills.js';
import { rewriteTerminalCommand } from '../operators/rewrite-terminal-command.js';
import { deltaRepeatedOutput } from '../operators/delta-repeated-output.js';
import {
  effectiveLedgerPath,
  loadConfig,
  modeFlags,
  pricingFor,
  type ConfigOverrides,
  type ModeFlags,
} from './config/index.js';
import { conversationTerms } from './compile/focus.js';
import { detectFormat, readRequest } from './model/read.js';
import type { Config } from './config/types.js';
import { ConfigError, VaultSchemaError } from './errors.js';
import { intOption } from './options.js';
import { canonicalJson, counterForModel, createCountMemo } from './measure/index.js';
import type { TokenCounter } from './measure/types.js';
import { createRecoveryTool } from './recovery/index.js';
import type { WorkingStateStore } from './recovery/working-state.js';
import type { RecoveryTool, Terminator } from './runtime-types.js';
import { stepOperator } from './operator-kit.js';
import {
  createStep,
  errorLabel,
  failOpen,
  note,
  storeScope,
  type ProviderRequest,
  type Step,
  type StepContext,
  type ToolCall,
  type ToolResult,
} from './step.js';
import { attributeRequest, type Attribution } from './telemetry/attribution.js';
import { openLedger, type Ledger, type TurnRecord } from './telemetry/ledger.js';
import { createMessagesMeter, type MessagesMeter } from './telemetry/meter.js';
import { anyFailedOpen, requestMetric, savedByStage } from './telemetry/metrics.js';
import { ReceiptVerifier } from './receipts/verify.js';
import { createVault, vaultOptionsFromConfig } from './vault/index.js';
import { vaultLocation } from './vault/configured.js';
import { VaultHealthError, VaultOpenError } from './vault/errors.js';
import { unavailableVault } from './vault/open.js';
import type { Vault } from './vault/types.js';

export type { RecoveryTool, Terminator } from './runtime-types.js';

/** Options of {@link createTerminator}. Every field is optional. */
export interface TerminatorOptions {
  /**
   * A complete, validated Config.
   *
   * @defaultValue `loadConfig({ env, overrides })`
   */
  readonly config?: Config;
  /**
   * Environment to read when `config` is absent.
   *
   * @defaultValue `process.env`
   */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /**
   * Field overrides applied over the environment when `config` is absent.
   *
   * @defaultValue none
   */
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
  /**
   * Sessions whose facade lanes stay subscribed (least recently used are dropped).
   *
   * @defaultValue 256
   */
  readonly maxSessions?: number;
  /**
   * Record a content-free metrics row per `compileRequest` call in the vault (sizes, tokens, savings
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
   *   One line on stderr says so, once per vault path and process (path and reason code only).
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
}

/** Which stages a config turns on: the modes table plus the output-budget cap. */
export interface ModeGates extends ModeFlags {
  /** Output-budget cap on the final request (compiler modes, when TOKEN_TERMINATOR_OUTPUT_CAP is on). */
  readonly budget: boolean;
  /** Exact-token half of the acceptance gate (TOKEN_TERMINATOR_TOKEN_BUDGET); chars only when off. */
  readonly tokenGate: boolean;
}

/**
 * The stage gates for a config: pure, so replay and status can report them.
 *
 * @example
 * import { loadConfig, modeGates } from 'token-terminator';
 * const gates = modeGates(loadConfig());
 * if (gates.budget) console.log('output caps are on');
 */
export function modeGates(
  config: Pick<Config, 'enabled' | 'mode' | 'temporalDelta' | 'tokenBudget' | 'outputCap'>,
): ModeGates {
  const flags = modeFlags(config);
  return Object.freeze({ ...flags, budget: flags.compiler && config.outputCap, tokenGate: config.tokenBudget });
}

/**
 * The counter the reduction stages' acceptance gates see: the real one, or none with
 * TOKEN_TERMINATOR_TOKEN_BUDGET off, so every gate decides on characters alone. Telemetry and the
 * output cap keep the real counter.
 */
function gateCounter(counter: TokenCounter, gates: ModeGates): { readonly counter?: TokenCounter } {
  return gates.tokenGate ? { counter } : {};
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
  const config =
    options.config ??
    loadConfig(
      options.env === undefined
        ? { overrides: options.overrides ?? {} }
        : { env: { ...options.env }, overrides: options.overrides ?? {} },
    );
  const vaultErrors = options.vaultErrors ?? 'passthrough';
  if (vaultErrors !== 'passthrough' && vaultErrors !== 'throw') {
    throw new ConfigError(
      `createTerminator: vaultErrors must be 'passthrough' or 'throw' (got ${String(vaultErrors)})`,
    );
  }
  const maxSessions = intOption('createTerminator', 'maxSessions', options.maxSessions, 256, 1);
  const ownsVault = options.vault === undefined;
  let vault: Vault;
  let vaultFailure: Error | undefined;
  let readOnlyVault = false;
  try {
    vault = options.vault ?? (await createVault(vaultOptionsFromConfig(config)));
  } catch (error) {
    if (error instanceof ConfigError) throw error;
    const failure =
      error instanceof VaultOpenError || error instanceof VaultSchemaError
        ? error
        : VaultOpenError.wrap(vaultLocation(config), error);
    if (vaultErrors === 'throw') throw failure;
    vaultFailure = failure;
    vault = unavailableVault(vaultLocation(config), failure);
    warnOnce(
      vaultLocation(config),
      `token-terminator: the vault at ${vaultLocation(config)} could not be opened (${openReason(failure)}); running in pass-through mode, nothing is reduced`,
    );
  }
  const ownsCounter = options.counter === undefined;
  let counter: TokenCounter;
  try {
    counter = options.counter ?? defaultCounter(config);
  } catch (error) {
    if (ownsVault) await vault.close();
    throw error;
  }
  // A vault that can only be read (read-only file, damaged file): nothing is reduced, recovery is served.
  if (vaultFailure === undefined && vault.readOnly) {
    const health = vault.health();
    const failure = new VaultHealthError(
      health.state === 'corrupt' ? 'E_VAULT_CORRUPT' : 'E_VAULT_READ_ONLY',
      health.state,
      `the vault at ${vault.path} is open read-only (${health.detail ?? health.state})`,
    );
    if (vaultErrors === 'throw' && ownsVault) {
      await vault.close();
      throw failure;
    }
    vaultFailure = failure;
    readOnlyVault = true;
  }
  const gates = modeGates(config);
  // The working-state graph lives in the vault (same connection), only when its budget is on.
  const workingState = config.workingGraphChars > 0 && vaultFailure === undefined ? vault.workingState : undefined;
  // One prompt counter for every session's output cap: counts per message object, like the
  // request stages' memos (a rebuilt copy they recognised counts as the earlier object).
  const budgetCounter = budgetCounterFrom(counter, { identityCache: true });
  const deps: PipelineDeps = {
    config,
    vault,
    counter,
    budgetCounter,
    gate: gateCounter(counter, gates),
    gates,
    focus: new FocusBoard(maxSessions * 3),
    ...(workingState === undefined ? {} : { workingState }),
  };
  let pressureFn: ReturnType<typeof createPressure> | undefined;
  const failure = vaultFailure;
  const recoveryTool: RecoveryTool = createRecoveryTool(
    failure === undefined
      ? { vault, config, health: () => vault.health(), ...(workingState === undefined ? {} : { workingState }) }
      : readOnlyVault
        ? { vault, config, health: () => vault.health(), status: async () => ({ passthrough: true, read_only: true }) }
        : { vault, config, status: async () => ({ passthrough: true, vault_open_reason: openReason(failure) }) },
  );
  const recordMetrics = options.metrics !== false && vaultFailure === undefined;
  const ledger = openLiveLedger(
    config,
    (options.ledger ?? (config.ledger && ownsVault)) && vaultFailure === undefined && vault.path !== ':memory:',
  );
  // Identity memo per message object plus a content memo, for hosts that rebuild message objects
  // on every call (framework message conversions): those re-serialize but never re-tokenize. The
  // built-in counters already count through the process-wide memo (measure/count-memo.ts), so only
  // a counter the host brings gets a content memo of its own.
  const meter = createMessagesMeter(ownsCounter ? counter : createCountMemo(counter, { maxEntries: 8192 }));
  const lanes = new LaneCache(maxSessions);
  let closed = false;

  const toolCalls = (): OperatorFunction<Step<ToolCall>, Step<ToolCall>> =>
    vaultFailure === undefined ? toolCallPipeline(deps) : passThrough(vaultFailure);
  const toolResults = (): OperatorFunction<Step<ToolResult>, Step<ToolResult>> =>
    vaultFailure === undefined ? toolResultPipeline(deps) : passThrough(vaultFailure);
  const requests = (): OperatorFunction<Step<ProviderRequest>, Step<ProviderRequest>> =>
    vaultFailure === undefined ? requestPipeline(deps) : passThrough(vaultFailure);

  /** The call's context with its own lock budget: every stage of this call draws from one busy timeout. */
  const withBudget = (context: StepContext): StepContext =>
    context.lockBudget !== undefined ? context : { ...context, lockBudget: { remainingMs: config.busyTimeoutMs } };
  const laneOf = (context: StepContext): string =>
    context.tenant === undefined || context.tenant === ''
      ? context.sessionId
      : `${context.sessionId}\u0000${context.tenant}`;

  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    lanes.closeAll();
    await ledger?.close();
    await pressureFn?.close().catch(() => undefined);
    if (ownsCounter) counter.dispose?.();
    if (ownsVault) await vault.close();
  };

  const reduceRequest = async (
    request: ProviderRequest,
    context: StepContext,
    signal?: AbortSignal,
  ): Promise<Step<ProviderRequest>> => {
    const out = await lanes
      .get('request', laneOf(context), requests)
      .run(createStep(request, withBudget(context), signal));
    if ((recordMetrics || ledger !== undefined) && !closed) {
      const sizes = measureBoth(out, meter);
      if (sizes !== undefined && recordMetrics)
        await recordRequestMetric(vault, meter, config.mode, out, sizes.raw, sizes.final);
      if (sizes !== undefined) await ledger?.record(out, sizes.raw.totalTokens, sizes.final.totalTokens);
    }
    return out;
  };

  return {
    config,
    vault,
    counter,
    toolCalls,
    toolResults,
    requests,
    reduceToolCall: (call, context, signal) =>
      lanes.get('tool_call', laneOf(context), toolCalls).run(createStep(call, context, signal)),
    reduceToolResult: (result, context, signal) =>
      lanes.get('tool_result', laneOf(context), toolResults).run(createStep(result, withBudget(context), signal)),
    reduceRequest,
    compileRequest: reduceRequest,
    pressure: async (request, context) => {
      try {
        pressureFn ??= createPressure(budgetOptions(config, budgetCounter));
        return await pressureFn(request, context);
      } catch {
        return preflightPressure(config, counter, request, context);
      }
    },
    endSession: async (context) => {
      lanes.end(laneOf(context));
      if (failure !== undefined) return;
      try {
        await vault.closeSession(storeScope(withBudget(context)));
      } catch {
        // The pins then age out with the session TTL instead.
      }
    },
    recoveryTool,
    close,
    [Symbol.asyncDispose]: close,
  };
}

/**
 * Preflight pressure P + R − 1 (incontext) on the compact canonical JSON of the whole request:
 * the facade's fallback when the budget planner cannot count (its own counting is provider-aware).
 *
 * @example
 * import { createTiktokenCounter, loadConfig, preflightPressure } from 'token-terminator';
 * const pressure = preflightPressure(loadConfig(), createTiktokenCounter(), request, { sessionId: 's1' });
 */
export function preflightPressure(
  config: Config,
  counter: TokenCounter,
  request: ProviderRequest,
  context: StepContext,
): number {
  const p = counter.count(canonicalJson(request, { compact: true }));
  const reserve = config.incontext.minOutputTokens;
  const cap = context.route?.outputCap;
  const r = cap !== undefined && cap > 0 && cap < reserve ? cap : reserve;
  return p + r - 1;
}

/**
 * The budget stage counts with the runtime's counter only for the tiktoken backend (same encoder,
 * no second copy); any other INCONTEXT_BACKEND (vllm /tokenize, tokenizer-json) is built by the
 * budget planner from the config, so the provider-aware count is the one that caps the output.
 */
function budgetOptions(config: Config, counter: BudgetCounter): { config: Config; counter?: BudgetCounter } {
  return config.incontext.backend === 'tiktoken' && config.tokenizerJson === '' ? { config, counter } : { config };
}

/** Raw and final sizes of a compiled request, for metrics and the ledger; undefined if measuring fails. */
function measureBoth(
  step: Step<ProviderRequest>,
  meter: MessagesMeter,
): { raw: Attribution; final: Attribution } | undefined {
  try {
    return { raw: attributeRequest(step.original, meter), final: attributeRequest(step.value, meter) };
  } catch {
    return undefined;
  }
}

/** One metrics row for a compiled request; telemetry never fails the call. */
async function recordRequestMetric(
  vault: Vault,
  meter: MessagesMeter,
  mode: string,
  step: Step<ProviderRequest>,
  raw: Attribution,
  final: Attribution,
): Promise<void> {
  try {
    const model = step.original['model'];
    const finalList = step.value['messages'] ?? step.value['input'];
    await vault.recordRequestMetric(
      requestMetric({
        sessionId: step.context.sessionId,
        requestId: step.context.requestId ?? `req-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`,
        mode,
        ...(typeof model === 'string' ? { model } : {}),
        raw,
        final,
        tokenizer: meter.counter.name,
        receipts: Array.isArray(finalList) ? new ReceiptVerifier(vault).referenced(finalList).length : 0,
        failedOpen: anyFailedOpen(step.decisions),
        savedByStage: savedByStage(step.decisions),
      }),
      storeScope(step.context),
    );
  } catch {
    // Metrics are diagnostics: a full or locked vault must not turn a reduction into an error.
  }
}

const warned = new Set<string>();

/**
 * One stderr line per vault path and process: a host that silently stopped saving tokens is the
 * failure a user cannot see otherwise. Path and reason code only, never content.
 */
function warnOnce(path: string, message: string): void {
  if (warned.has(path)) return;
  warned.add(path);
  try {
    process.stderr.write(`${message}\n`);
  } catch {
    // a closed stderr must not stop the host
  }
}

/** The experiment ledger as the facade writes it: one finished turn per compiled request. */
/** One request for {@link LiveLedger.recordAll}. */
export interface LiveLedgerEntry {
  readonly step: Pick<Step<ProviderRequest>, 'context' | 'original'>;
  readonly rawTokens: number;
  readonly finalTokens: number;
}

export interface LiveLedger {
  /** Record one request (its context and the caller's original); never throws, a broken ledger stops recording. */
  record(
    step: Pick<Step<ProviderRequest>, 'context' | 'original'>,
    rawTokens: number,
    finalTokens: number,
  ): Promise<void>;
  /** Record many requests in one transaction (in order); never throws, like `record`. */
  recordAll(entries: readonly LiveLedgerEntry[]): Promise<void>;
  close(): Promise<void>;
}

/**
 * The live ledger of `config` (opened on first record), or undefined when `on` is false. For hosts
 * that measure requests themselves, off the request path (the gateway does it after the answer
 * went out), with `createTerminator({ ledger: false })`.
 */
export function openLiveLedger(config: Config, on: boolean): LiveLedger | undefined {
  if (!on) return undefined;
  let ledger: Promise<Ledger> | undefined;
  let broken = false;
  // With a PostgreSQL vault the ledger lives in the same database; on SQLite it is its own file.
  const open = (): Promise<Ledger> =>
    openLedger(config.dbUrl !== '' ? { url: config.dbUrl } : { path: effectiveLedgerPath(config) });
  const recordAll = async (entries: readonly LiveLedgerEntry[]): Promise<void> => {
    if (broken || entries.length === 0) return;
    try {
      ledger ??= open();
      const l = await ledger;
      const turns = entries.map(({ step, rawTokens, finalTokens }): TurnRecord => {
        const { sessionId, requestId } = step.context;
        const m = step.original['model'] ?? step.context.route?.model;
        const model = typeof m === 'string' && m !== '' ? { model: m } : {};
        const turnId = requestId ?? randomUUID();
        // The tokens this request sends are the turn's input: what the mode changes.
        return {
          sessionId,
          turnId,
          mode: config.mode,
          experiment: config.experiment,
          prompt: lastUserText(step.original),
          ...model,
          rawTokens,
          finalTokens,
          usage: { inputTokens: finalTokens },
          outcome: 'completed',
        };
      });
      await l.recordTurns(turns);
    } catch {
      // The ledger is an experiment record: an unwritable file must not touch the host's request.
      broken = true;
    }
  };
  return {
    record(step, rawTokens, finalTokens) {
      return recordAll([{ step, rawTokens, finalTokens }]);
    },
    recordAll,
    async close() {
      try {
        await (await ledger)?.close();
      } catch {
        // never opened, or already closed
      }
    },
  };
}

/** The text of the request's last user message (Chat, Responses or Anthropic shape); fingerprinted, never stored. */
function lastUserText(request: ProviderRequest): string {
  const list = request['messages'] ?? request['input'];
  if (typeof list === 'string') return list;
  if (!Array.isArray(list)) return '';
  for (let i = list.length - 1; i >= 0; i--) {
    const item = list[i] as { role?: unknown; content?: unknown } | null;
    if (item === null || typeof item !== 'object' || item.role !== 'user') continue;
    if (typeof item.content === 'string') return item.content;
    if (Array.isArray(item.content)) {
      return item.content
        .map((part: unknown) =>
          part !== null && typeof part === 'object' && typeof (part as { text?: unknown }).text === 'string'
            ? (part as { text: string }).text
            : '',
        )
        .join('\n');
    }
    return '';
  }
  return '';
}

/** The reason code of a vault-open failure (content-free), for status. */
function openReason(failure: Error): string {
  return failure instanceof VaultOpenError ? (failure.reason ?? failure.code) : errorLabel(failure);
}

function defaultCounter(config: Config): TokenCounter {
  return counterForModel(undefined, { tokenizerJson: config.tokenizerJson, encoding: config.tiktokenEncoding });
}

// ---------------------------------------------------------------------------------------------
// Pipelines. Stages not switched on by the mode are left out entirely (identity), not skipped
// per element, so a disabled mode costs nothing.

interface PipelineDeps {
  readonly config: Config;
  readonly vault: Vault;
  /** The real counter: the output cap counts the prompt with it. */
  readonly counter: TokenCounter;
  /** The output cap's counter over `counter` (shared by every session). */
  readonly budgetCounter: BudgetCounter;
  /** `{ counter }` for the reduction stages' acceptance gates, or `{}` (chars only; see gateCounter). */
  readonly gate: { readonly counter?: TokenCounter };
  readonly gates: ModeGates;
  readonly workingState?: WorkingStateStore;
  /** The focus terms of each session's latest request, for the tool stage's views (src/compile/focus.ts). */
  readonly focus: FocusBoard;
}

/**
 * The names each session's latest request is about (its task, the agent's messages and
 * commands), written by the request pipeline and read by the tool stage, whose views keep the
 * lines of a large output that mention them. In memory, for the most recent sessions: a process
 * that never saw a session's request simply makes views without focus lines.
 */
class FocusBoard {
  // Reading does not refresh a session (peek): the least recently written one goes first.
  readonly #terms: LRUCache<string, readonly string[]>;
  constructor(readonly max: number) {
    this.#terms = new LRUCache({ max: Math.max(1, Math.floor(max)) });
  }
  get(sessionId: string): readonly string[] {
    return this.#terms.peek(sessionId) ?? [];
  }
  set(sessionId: string, terms: readonly string[]): void {
    this.#terms.set(sessionId, terms);
  }
}

/** Records the request's focus terms for its session; never changes the request. */
function recordFocus(board: FocusBoard): Op<ProviderRequest> {
  return stepOperator<ProviderRequest>('focus', () => (step) => {
    const view = readRequest(step.value);
    if (view.items.length > 0) board.set(step.context.sessionId, conversationTerms(view));
    return undefined;
  });
}

type Op<T> = OperatorFunction<Step<T>, Step<T>>;

/**
 * Pass-through mode (the vault could not be opened): no stage runs at all, not even those that
 * need no vault, so the host sees exactly its originals and one clear reason on every Step
 * rather than a partial pipeline whose behaviour depends on which stage touches the vault.
 */
function passThrough<T>(failure: Error): Op<T> {
  const decision = Object.freeze({
    stage: 'runtime',
    kind: 'failed_open',
    reason: 'vault_unavailable',
    error: errorLabel(failure),
  } as const);
  return stepOperator<T>('runtime', () => (step) => note(step, decision));
}

function chain<T>(ops: readonly Op<T>[]): Op<T> {
  return (source) => ops.reduce((acc, op) => acc.pipe(op), source);
}

function toolCallPipeline(d: PipelineDeps): Op<ToolCall> {
  if (!d.gates.terminal && !d.gates.suggest) return identity;
  const c = d.config;
  return rewriteTerminalCommand({
    flags: d.gates,
    ...(c.rtkPath === '' ? {} : { rtkPath: c.rtkPath }),
    timeoutMs: c.timeoutMs,
    cacheTtlMs: c.cacheTtlSeconds * 1000,
    cacheSize: c.cacheSize,
    exclude: c.exclude,
    backends: c.backends,
    pytestGuard: c.pytestGuard,
    previewMarker: c.previewMarker,
    toolNames: c.toolNames,
  });
}

function toolResultPipeline(d: PipelineDeps): Op<ToolResult> {
  const c = d.config;
  return chain<ToolResult>([
    d.gates.temporal
      ? deltaRepeatedOutput({
          vault: d.vault,
          ...d.gate,
          flags: d.gates,
          scope: c.temporalScope,
          minChars: c.temporalMinChars,
          toolNames: c.toolNames,
          maxArtifactChars: c.maxArtifactChars,
        })
      : identity,
    d.gates.native
      ? compressToolResult({
          vault: d.vault,
          ...d.gate,
          flags: d.gates,
          nativeMinChars: c.nativeMinChars,
          nativeMaxChars: c.nativeMaxChars,
          maxArtifactChars: c.maxArtifactChars,
          backends: c.backends,
          toolNames: c.toolNames,
          focus: (step) => d.focus.get(step.context.sessionId),
        })
      : identity,
  ]);
}

function requestPipeline(d: PipelineDeps): Op<ProviderRequest> {
  if (!d.gates.compiler && !d.gates.budget) return identity;
  const c = d.config;
  const { vault, gate } = d;
  const observations = c.observationPattern;
  return chain<ProviderRequest>([
    d.gates.compiler && d.gates.native ? recordFocus(d.focus) : identity,
    d.gates.compiler
      ? collapseDuplicates({
          vault,
          ...gate,
          minArtifactChars: c.minArtifactChars,
          maxArtifactChars: c.maxArtifactChars,
          maxInlineChars: c.maxInlineChars,
          observations,
        })
      : identity,
    // Routing rewrites the instruction prefix: only as the explicit opt-in (docs/fidelity.md).
    d.gates.compiler && c.skillRouting ? routeSkills({ ...gate, vault }) : identity,
    d.gates.compiler && c.contextCompaction
      ? compileRequest({
          vault,
          ...gate,
          minVaultChars: c.contextMinVaultChars,
          maxArtifactChars: c.maxArtifactChars,
          inlineRecentTurns: c.contextInlineRecentTurns,
          inlineLeases: Math.max(1, c.inlineLeases),
          blockTurns: c.contextBlockTurns,
          requestsAhead: c.rewriteHorizonRequests,
          pricing: (step) => pricingFor(c, step.context.route, detectFormat(step.value)),
          digestDiagnosticChars: c.digestDiagnosticChars,
          reasoning: c.reasoningReduction,
          collapseAfterTurns: c.contextCollapseAfterTurns,
          observations,
          workingGraphChars: c.workingGraphChars,
          ...(d.workingState === undefined ? {} : { workingState: d.workingState }),
        })
      : identity,
    d.gates.budget ? capOutputBudget(budgetOptions(c, d.budgetCounter)) : identity,
  ]);
}

// ---------------------------------------------------------------------------------------------
// Lanes: one long-lived subscription per (pipeline, session) shared by the Promise facades.

type LaneKind = 'tool_call' | 'tool_result' | 'request';

class LaneCache {
  readonly #lanes: LRUCache<string, Lane<never>>;

  constructor(max: number) {
    this.#lanes = new LRUCache({
      max: Math.floor(Math.max(1, max) * 3),
      // After the new lane is in: the least recently used one finishes its queued calls, then closes.
      disposeAfter: (lane, _key, reason) => {
        if (reason === 'evict') lane.drain();
      },
    });
  }

  get<T>(kind: LaneKind, sessionId: string, operator: () => Op<T>): Lane<T> {
    const key = `${kind}\u0000${sessionId}`;
    const found = this.#lanes.get(key) as Lane<T> | undefined;
    if (found !== undefined) return found;
    const lane = new Lane<T>(`runtime:${kind}`, operator);
    this.#lanes.set(key, lane as unknown as Lane<never>);
    return lane;
  }

  /** Drop every lane of a session (its host ended it). */
  end(sessionId: string): void {
    for (const kind of ['tool_call', 'tool_result', 'request'] as const) {
      const key = `${kind}\u0000${sessionId}`;
      this.#lanes.get(key)?.drain();
      this.#lanes.delete(key);
    }
  }

  closeAll(): void {
    for (const lane of this.#lanes.rvalues()) lane?.close(); // oldest first
    this.#lanes.clear();
  }
}

interface Pending<T> {
  readonly input: Step<T>;
  resolve(step: Step<T>): void;
}

/**
 * Pushes Steps into one subscription of an operator chain and resolves each call with its output.
 * Operators built with `stepOperator` emit exactly one output per input, in order, so outputs pair
 * with calls FIFO. An aborted call resolves at once with its input (the stage sees the abort
 * through the Step's signal); its later output is dropped. If the chain errors or completes,
 * pending calls fail open and the next call subscribes afresh.
 */
export class Lane<T> {
  readonly #stage: string;
  readonly #operator: () => Op<T>;
  #subject: Subject<Step<T>> | undefined;
  #subscription: Subscription | undefined;
  readonly #queue: Pending<T>[] = [];
  #closed = false;
  #draining = false;

  constructor(stage: string, operator: () => Op<T>) {
    this.#stage = stage;
    this.#operator = operator;
  }

  /** Run one Step; never rejects. */
  run(step: Step<T>): Promise<Step<T>> {
    if (this.#closed || this.#draining)
      return Promise.resolve(note(step, { stage: this.#stage, kind: 'skipped', reason: 'runtime closed' }));
    if (step.signal?.aborted)
      return Promise.resolve(note(step, { stage: this.#stage, kind: 'skipped', reason: 'aborted' }));
    return new Promise<Step<T>>((resolve) => {
      let settled = false;
      const signal = step.signal;
      const onAbort = (): void => settle(note(step, { stage: this.#stage, kind: 'skipped', reason: 'aborted' }));
      const settle = (out: Step<T>): void => {
        if (settled) return;
        settled = true;
        signal?.removeEventListener('abort', onAbort);
        resolve(out);
        if (this.#draining && this.#queue.length === 0) this.close();
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#queue.push({ input: step, resolve: settle });
      try {
        this.#ensure().next(step);
      } catch (error) {
        this.#fail(error);
      }
    });
  }

  /** Stop taking calls; close once the queued ones are answered (LRU eviction). */
  drain(): void {
    this.#draining = true;
    if (this.#queue.length === 0) this.close();
  }

  /** Unsubscribe (cancels in-flight work); queued calls resolve with their input. */
  close(): void {
    this.#closed = true;
    const sub = this.#subscription;
    this.#subscription = undefined;
    this.#subject = undefined;
    sub?.unsubscribe();
    for (const p of this.#queue.splice(0))
      p.resolve(note(p.input, { stage: this.#stage, kind: 'skipped', reason: 'runtime closed' }));
  }

  #ensure(): Subject<Step<T>> {
    if (this.#subject !== undefined) return this.#subject;
    const subject = new Subject<Step<T>>();
    this.#subject = subject;
    this.#subscription = subject.pipe(this.#operator()).subscribe({
      next: (out) => this.#queue.shift()?.resolve(out),
      error: (error: unknown) => this.#fail(error),
      complete: () => this.#fail(new Error('pipeline completed')),
    });
    return subject;
  }

  #fail(error: unknown): void {
    const sub = this.#subscription;
    this.#subscription = undefined;
    this.#subject = undefined;
    sub?.unsubscribe();
    for (const p of this.#queue.splice(0)) p.resolve(failOpen(p.input, this.#stage, error));
  }
}
