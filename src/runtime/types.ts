import type { OperatorFunction } from 'rxjs';
import type { Config } from '../config/types.js';
import type { TokenCounter } from '../measure/types.js';
import type { Digests } from '../ledger/digests.js';
import type { MessagesMeter } from '../ledger/messages-meter.js';
import type { RequestAccount } from '../telemetry/request-account.js';
import type { ToolCredits } from '../telemetry/tool-credits.js';
import type { Decision, ProviderRequest, RequestFormat, Step, StepContext, ToolCall, ToolResult } from '../step.js';
import type { Vault } from '../vault/types.js';

/** Who is calling the recovery tool: always the host's ids, never the model's. */
export interface RecoveryHost {
  readonly sessionId: string;
  /** Default `''`: the single local tenant. */
  readonly tenant?: string;
}

/** The recovery tool as a framework-neutral definition. */
export interface RecoveryTool {
  readonly name: 'token_terminator';
  readonly description: string;
  /** JSON Schema of the arguments (no session id: the host supplies it). */
  readonly parameters: Readonly<Record<string, unknown>>;
  /**
   * Run one call for the host's session and tenant (it reads only what they observed or were
   * delivered). Never throws for bad arguments or unknown artifacts: returns a JSON error result.
   */
  handle(args: unknown, host: RecoveryHost): Promise<string>;
}

/** Options of {@link Terminator.reduceRequest}. */
export interface ReduceRequestOptions {
  /** Record the request's metrics row and ledger turn from its Step. @defaultValue true */
  readonly record?: boolean;
}

/** What a host sent for a request it accounts itself ({@link Terminator.account}). */
export interface RecordRequestOptions {
  /** The request as it went to the model. @defaultValue the Step's value */
  readonly sent?: ProviderRequest;
  /** Requests the recovery rounds sent after it. @defaultValue none */
  readonly continuations?: readonly ProviderRequest[];
}

/** One request for {@link Terminator.prepare}. */
export interface PrepareOptions {
  readonly request: ProviderRequest;
  /** Its context; `format` is the wire format the host received or built it in (never guessed). */
  readonly context: StepContext & { readonly format: Exclude<RequestFormat, 'unknown'> };
  /** Aborts the preparation: what is not reduced yet passes as sent. @defaultValue none */
  readonly signal?: AbortSignal | undefined;
  /**
   * Offer the recovery tool when the request carries a receipt, then in every later request of the session.
   *
   * @defaultValue false
   */
  readonly offer?: boolean;
  /** Show the session's answered recovery rounds again (its recovery state in the vault). @defaultValue true */
  readonly exchanges?: boolean;
  /**
   * Reduce the tool outputs the request shows for the first time (each shown the same way later).
   *
   * @defaultValue true
   */
  readonly toolOutputs?: boolean;
  /**
   * The session is shared through the vault (the gateway: restarts, replicas): the offered tool is
   * saved in its recovery state, and a failure of the store or the pipeline rejects (the host sends
   * the request as it came). Otherwise each part fails open on its own.
   *
   * @defaultValue false
   */
  readonly shared?: boolean;
  /** As {@link ReduceRequestOptions.record}. @defaultValue true */
  readonly record?: boolean;
}

/** What {@link Terminator.prepare} made of a request: what to send, and what the accounting reads. */
export interface Prepared {
  /** The request to send (the host's own object when nothing changed). */
  readonly request: ProviderRequest;
  readonly changed: boolean;
  /** The recovery tool is offered in `request`. */
  readonly offered: boolean;
  /** Answer one of the model's recovery calls with the host's session and tenant (never the model's); never rejects. */
  answer(args: unknown): Promise<string>;
  /** A recovery round's continuation through the request stream again (not recorded), so it fits as the first did. */
  refit(request: ProviderRequest, signal?: AbortSignal): Promise<ProviderRequest>;
  /**
   * Remember the recovery rounds a host answered for this request (src/recovery/exchanges.ts), so
   * later requests show them at their place: `serverSide` for a conversation the provider keeps,
   * `alias` when the upstream continues from another response id than the client's stream carried.
   * Nothing without `exchanges`. Rejects when the store does.
   */
  remember(
    exchange: readonly unknown[],
    serverSide?: { readonly responseId?: string; readonly pendingItems?: readonly unknown[] },
    alias?: { readonly from: string; readonly to: string },
  ): Promise<void>;
  readonly context: StepContext;
  /** The request stages' Step (absent when they failed), for a host that records the request itself. */
  readonly step: Step<ProviderRequest> | undefined;
  /** The request stages' decisions. */
  readonly decisions: readonly Decision[];
  /** The `failed_open` decisions of the tool outputs reduced in this request (each shown as sent). */
  readonly failedOpen: readonly Decision[];
  /** The request the request stages were given (its tool outputs rendered). */
  readonly staged: ProviderRequest;
  /** The host's request built from stable objects (same content), for measuring. */
  readonly measured: ProviderRequest;
}

/** What a host hands {@link Terminator.account} beside the request's Step. */
export interface AccountOptions extends RecordRequestOptions {
  /**
   * What the host would have sent without us, when it has it (the gateway: the client's body).
   *
   * @defaultValue the Step's original with each tool output's rendering at its raw size
   */
  readonly raw?: ProviderRequest;
  /** What the request weighs in the backlog (`TerminatorOptions.telemetryBacklogWeight`). @defaultValue 0 */
  readonly weight?: number;
  /**
   * Called with the request's figures once measured (or the error measuring it), before they are written.
   *
   * @defaultValue none
   */
  readonly measured?: (result: { readonly account?: RequestAccount; readonly error?: unknown }) => void;
}

/** What `createTerminator(config)` returns: the two pipelines, Promise facades and the recovery tool. */
export interface Terminator extends AsyncDisposable {
  readonly config: Config;
  readonly vault: Vault;
  readonly counter: TokenCounter;
  /**
   * True in pass-through mode (the vault could not be opened): nothing is reduced, stored or
   * recoverable, and a host offers no recovery tool. A read-only vault is not pass-through. Absent: false.
   */
  readonly passThrough?: boolean;
  /**
   * The runtime's message meter (what its telemetry attributes tokens with), over the request
   * stages' per-item measurements: a host accounting the same requests counts only what they did not.
   */
  readonly meter?: MessagesMeter;
  /** The runtime's item ledger of digests (src/ledger/digests.ts): every part names a text by it, hashing it once. */
  readonly digests?: Digests;
  /** Tool-call stream: rtk rewrite. */
  toolCalls(): OperatorFunction<Step<ToolCall>, Step<ToolCall>>;
  /** Tool-result stream: temporal delta → compress. */
  toolResults(): OperatorFunction<Step<ToolResult>, Step<ToolResult>>;
  /** Request stream: dedupe → skill gate → compile → budget cap. */
  requests(): OperatorFunction<Step<ProviderRequest>, Step<ProviderRequest>>;

  /** Promise facades: never reject because of a reduction; an aborted signal passes the input through. */
  reduceToolCall(call: ToolCall, context: StepContext, signal?: AbortSignal): Promise<Step<ToolCall>>;
  reduceToolResult(result: ToolResult, context: StepContext, signal?: AbortSignal): Promise<Step<ToolResult>>;
  /**
   * One provider request through the whole request stream. Its metrics row and ledger turn are
   * recorded unless `options.record` is false (a host that changes the request after, or sends
   * recovery rounds, records it with `account`).
   */
  reduceRequest(
    request: ProviderRequest,
    context: StepContext,
    signal?: AbortSignal,
    options?: ReduceRequestOptions,
  ): Promise<Step<ProviderRequest>>;
  /**
   * The host path (src/runtime/host-path.ts): show the session's answered recovery rounds, reduce
   * the tool outputs shown for the first time, run the request stream, offer the recovery tool.
   * The gateway and the client wrappers only translate types around it.
   */
  prepare(options: PrepareOptions): Promise<Prepared>;
  /**
   * Account one answered request (prepared with `record: false`): its metrics row and ledger turn,
   * measured after the answer went out, in batches, from what the request stages measured. The
   * gateway and the client wrappers come here. Optional: a Terminator of one's own
   * need not account.
   *
   * @example
   * import { recoveryToolDefinition } from 'token-terminator/adapters/custom-loop';
   * const step = await tt.reduceRequest(body, context, undefined, { record: false });
   * tt.account?.(step, { sent: { ...step.value, tools: [...tools, recoveryToolDefinition(tt, 'chat')] } });
   */
  account?(step: Step<ProviderRequest>, options?: AccountOptions): void;
  /** Resolves once the backlog of requests waiting for their accounting has room; undefined when it has room now. */
  accountingRoom?(): Promise<void> | undefined;
  /** The tool outputs this Terminator reduced, by session: what each later request showing them saved (src/telemetry/tool-credits.ts). */
  readonly toolCredits?: ToolCredits;
  /** Preflight pressure P + R − 1 for hosts that trigger compression themselves. */
  pressure(request: ProviderRequest, context: StepContext): Promise<number>;
  /**
   * Per-session state held now: the sessions, their estimated bytes (0 without a `maxSessionBytes`
   * bound) and, with a context, that session's entries over every session-keyed structure (0 after
   * {@link Terminator.endSession}).
   */
  heldState(context?: Pick<StepContext, 'sessionId' | 'tenant'>): {
    readonly sessions: number;
    readonly bytes: number;
    readonly entries?: number;
  };
  /**
   * The host ended a session: what is held in memory for it is dropped and its pins, leases and
   * renderings become releasable (else they age out after TOKEN_TERMINATOR_SESSION_TTL_SECONDS of
   * inactivity). A later call with the same session id starts it again. Never rejects.
   */
  endSession(context: StepContext): Promise<void>;
  readonly recoveryTool: RecoveryTool;
  /**
   * Resolves once the telemetry of every request answered so far is written (metrics row, ledger
   * turn): `reduceRequest` answers before they are recorded, in call order, on a later turn of the
   * event loop. For hosts and tests that read them right after a call. Never rejects: a failed
   * record is dropped.
   *
   * @example
   * await tt.reduceRequest(request, { sessionId: 's1' });
   * await tt.settled();
   * console.log(await tt.vault.metricsSummary());
   */
  settled(): Promise<void>;
  /** Closes the lanes, waits for the pending telemetry ({@link Terminator.settled}), then closes what it opened. */
  close(): Promise<void>;
}
