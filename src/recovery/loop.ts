/**
 * The recovery loop: when the model calls `token_terminator`, answer the call from the vault and
 * ask the model again, so the caller only ever sees the model's final answer. One framework-free
 * implementation per wire format, shared by the custom-loop wrappers (`handleRecovery: true`) and
 * the proxy (which also drives it over streams, see stream.ts).
 *
 * A turn that mixes recovery calls with calls to the caller's own tools is not continued: the
 * caller gets the turn without the recovery calls (its own calls intact), and the answered round
 * comes back as an exchange the caller's store shows again before that turn on the next request.
 * The same holds when the round budget is spent.
 */
import type { RecoveryHost, RecoveryTool } from '../runtime/types.js';
import { parseArgs } from '../model/read.js';
import { errorLabel, type ProviderRequest } from '../step.js';
import {
  continueRequest,
  exchangeItems,
  serverSideState,
  splitCalls,
  stripRecoveryCalls,
  sumUsage,
  usageOf,
  withUsage,
  type RecoveryCall,
  type RecoveryWireFormat,
} from './formats.js';

/**
 * Parse (when a JSON string) and keep only the keys the schema declares; a model-sent session id is dropped.
 *
 * @example
 * import { recoveryArgs } from 'token-terminator/adapters/custom-loop';
 * recoveryArgs(terminator.recoveryTool, '{"action":"status","extra":1}'); // { action: 'status' }
 */
export function recoveryArgs(tool: Pick<RecoveryTool, 'parameters'>, args: unknown): Record<string, unknown> {
  const properties = (tool.parameters as { properties?: Record<string, unknown> }).properties;
  const allowed = properties === undefined ? undefined : new Set(Object.keys(properties));
  return Object.fromEntries(
    Object.entries(parseArgs(args)).filter(
      ([key]) => key !== 'session_id' && key !== 'sessionId' && (allowed === undefined || allowed.has(key)),
    ),
  );
}

/**
 * Answer one recovery call for a host session. Never throws: an internal failure becomes a JSON
 * error result the model can read (class label only, no content). `host`: the session id, or the
 * session and tenant (the proxy's API-key digest) the call is scoped to.
 */
export async function answerRecoveryCall(
  tool: RecoveryTool,
  args: unknown,
  host: string | RecoveryHost,
): Promise<string> {
  try {
    return await tool.handle(recoveryArgs(tool, args), typeof host === 'string' ? { sessionId: host } : host);
  } catch (error) {
    return JSON.stringify({ error: 'recovery failed', error_type: errorLabel(error) });
  }
}

/** Options of {@link runRecoveryLoop}. */
export interface RecoveryLoopOptions<R> {
  readonly format: RecoveryWireFormat;
  /** The first request (already compiled, offering the recovery tool). */
  readonly request: ProviderRequest;
  /** Dispatch one request upstream. */
  send(request: ProviderRequest, round: number): Promise<R>;
  /** The JSON body of a response to inspect, or undefined when it is not a successful answer (errors end the loop as they are). */
  bodyOf(response: R): unknown;
  /** Answer one call (exact content from the vault). */
  answer(call: RecoveryCall): Promise<string>;
  /** Recovery rounds allowed before the caller gets the turn as it is. Default: 3. */
  readonly maxRounds?: number;
  /** Called after each answered round with the number of calls in it. Default: none. */
  readonly onRound?: (calls: number, round: number) => void;
  /**
   * Fit a continuation request (the request before, the model's recovery calls and their answers)
   * into the window again before it is sent; a failure sends it as it is. Default: none.
   */
  readonly refit?: (request: ProviderRequest, round: number) => Promise<ProviderRequest>;
}

/** What the loop ended with. */
export interface RecoveryLoopResult<R> {
  /** The last upstream response. */
  readonly response: R;
  /** Every answered round as conversation items, in order (empty when the model never called the tool). */
  readonly exchange: readonly unknown[];
  /** Rounds answered and continued upstream. */
  readonly rounds: number;
  /** Recovery calls answered. */
  readonly calls: number;
  /** Why the last answered round was not continued: a mixed turn, or the round budget. */
  readonly stopped?: 'mixed' | 'rounds';
  /** True when the upstream keeps the conversation (the exchange is already there; do not show it again). */
  readonly serverSide: boolean;
  /**
   * The body the caller gets when it differs from the last response's: its recovery calls (and the
   * text the model wrote beside them) left out, and its usage adding up every round's. Undefined:
   * relay the last response as it is.
   */
  readonly finalBody?: unknown;
}

/**
 * Send `request`; while the model answers with recovery calls only, answer them and continue.
 *
 * @example
 * const out = await runRecoveryLoop({ format: 'chat', request, send: (r) => client.chat.completions.create(r), bodyOf: (r) => r,
 *   answer: (call) => answerRecoveryCall(terminator.recoveryTool, call.arguments, sessionId) });
 */
export async function runRecoveryLoop<R>(options: RecoveryLoopOptions<R>): Promise<RecoveryLoopResult<R>> {
  const { format } = options;
  const maxRounds = options.maxRounds ?? 3;
  const serverSide = serverSideState(options.request, format);
  const exchange: unknown[] = [];
  let request = options.request;
  let rounds = 0;
  let calls = 0;
  let usage: Record<string, unknown> | undefined;
  for (;;) {
    const response = await options.send(request, rounds);
    const body = options.bodyOf(response);
    const split = body === undefined ? { recovery: [], others: 0 } : splitCalls(body, format);
    if (split.recovery.length === 0) {
      // The caller pays for every round: the usage it gets adds them up.
      const finalBody =
        rounds === 0 || usage === undefined ? undefined : withUsage(body, sumUsage(usage, usageOf(body)));
      return { response, exchange, rounds, calls, serverSide, ...(finalBody === undefined ? {} : { finalBody }) };
    }
    usage = sumUsage(usage, usageOf(body));
    const answers = new Map<string, string>();
    for (const call of split.recovery) answers.set(call.id, await options.answer(call));
    calls += split.recovery.length;
    const items = exchangeItems(body, format, answers);
    exchange.push(...items);
    options.onRound?.(split.recovery.length, rounds);
    if (split.others > 0 || rounds >= maxRounds) {
      // A round of recovery calls only, out of rounds: what the model wrote beside them is not the caller's answer.
      return {
        response,
        finalBody: withUsage(stripRecoveryCalls(body, format, split.others === 0), usage),
        exchange,
        rounds,
        calls,
        stopped: split.others > 0 ? 'mixed' : 'rounds',
        serverSide,
      };
    }
    rounds++;
    request = continueRequest(request, format, body, items);
    if (options.refit !== undefined) request = await options.refit(request, rounds).catch(() => request);
  }
}
