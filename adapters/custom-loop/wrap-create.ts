/**
 * One `create(body, options)` call of a provider SDK, run through the request pipeline: reduce the
 * tool outputs the body shows for the first time (as the gateway does: the loop that ran the tools
 * needs no other hook, and every later request shows each output as it was first shown), compile the
 * body, offer the recovery tool when the compiled body carries a receipt (then for the rest of the
 * session, as the last tool), dispatch it, and on a provider output-cap error retry ONCE with the
 * available output the error names. With `handleRecovery`, the model's recovery calls are answered
 * here (src/recovery's loop, the one the proxy runs) and the caller gets the final answer; the
 * answered rounds are shown again at their place in the session's later requests. Typed
 * structurally so no SDK's classes leak into another's.
 */
import { randomUUID } from 'node:crypto';
import { parseOutputCapError } from '../../src/budget/index.js';
import { offersRecoveryTool, type RecoveryWireFormat } from '../../src/recovery/formats.js';
import { runRecoveryLoop } from '../../src/recovery/loop.js';
import { definedFields } from '../../src/options.js';
import type { Terminator } from '../../src/runtime/types.js';
import type { Decision, ProviderRequest, Route, StepContext } from '../../src/step.js';
import { override } from '../shared/override.js';
import { WIRE } from '../shared/wire.js';
import { outputCapField, readOutputCap, withOutputCap, type OutputCapField } from '../shared/functions.js';

/** Options shared by the client wrappers. */
export interface ClientWrapOptions {
  /** The host's session id, or a function of the body. @defaultValue one random id per wrapped client */
  readonly sessionId?: string | ((body: ProviderRequest) => string);
  /** Route (context window, explicit cap) for a body. @defaultValue `{ model: body.model }` */
  readonly route?: Route | ((body: ProviderRequest) => Route | undefined);
  /** Request id for a body; an identical retry must reuse it. @defaultValue a random UUID per call */
  readonly requestId?: (body: ProviderRequest) => string;
  /**
   * Available output tokens named by a provider error, else undefined.
   *
   * @defaultValue src/budget's parser (an answer that only bounds the whole window is not a cap)
   */
  readonly parseOutputCapError?: (error: unknown) => number | undefined;
  /** Content-free decisions of every call (for metrics). @defaultValue none */
  readonly onDecisions?: (decisions: readonly Decision[]) => void;
  /**
   * Answer the model's `token_terminator` calls here and return only the final answer (non-streamed
   * calls; a streamed call still gets the tool and the caller answers it).
   *
   * @defaultValue false
   */
  readonly handleRecovery?: boolean;
  /** Recovery rounds per call with `handleRecovery`. @defaultValue 3 */
  readonly recoveryRounds?: number;
  /** Offer the recovery tool when a sent request carries a receipt. @defaultValue true */
  readonly offerRecoveryTool?: boolean;
  /**
   * Send the tool outputs a request shows for the first time through the tool-result stages
   * (compaction, delta against an earlier output; the original goes to the vault), and show each
   * one the same way in every later request of the session. Outputs already reduced with
   * `reduceToolResult` are left as they are.
   *
   * @defaultValue true
   */
  readonly reduceToolOutputs?: boolean;
}

/** The part of an SDK call's second argument the wrapper reads. */
export interface RequestOptionsLike {
  readonly signal?: AbortSignal | null | undefined;
}

/** A client's `create` method, typed loosely so both the OpenAI and the Anthropic clients fit. */
export type CreateFn = (body: never, options?: never) => PromiseLike<unknown>;

/** The SDK's APIPromise extras, forwarded once the real call exists. */
interface ResponseExtras {
  asResponse(): Promise<unknown>;
  withResponse(): Promise<unknown>;
}

/** The SDK's `create` as the wrapper calls it. */
type SendFn = (body: ProviderRequest, options?: RequestOptionsLike) => PromiseLike<unknown> & Partial<ResponseExtras>;

/** A view of `target` whose `create` runs through the request pipeline (the target is never modified). */
export function wrapCreate<T extends { create: CreateFn }>(
  target: T,
  terminator: Terminator,
  format: RecoveryWireFormat,
  options: ClientWrapOptions,
): T {
  const defaultSession = `custom-loop:${randomUUID()}`;
  // An `upper_bound` answer names only the whole window (the input still has to fit): no cap for a retry.
  const parse =
    options.parseOutputCapError ??
    ((error: unknown) => {
      const info = parseOutputCapError(error);
      return info === undefined || info.kind === 'upper_bound' ? undefined : info.availableOutputTokens;
    });
  const contextFor = (body: ProviderRequest) => callContext(body, options, format, defaultSession);
  const send = target.create.bind(target) as unknown as SendFn;
  const wrapped = (
    body: ProviderRequest,
    requestOptions?: RequestOptionsLike,
  ): Promise<unknown> & Partial<ResponseExtras> => {
    let lastCall: ReturnType<SendFn> | undefined;
    const signal = requestOptions?.signal ?? undefined;
    const dispatch = async (compiled: ProviderRequest): Promise<unknown> => {
      lastCall = send(compiled, requestOptions);
      try {
        return await lastCall;
      } catch (error) {
        const retryBody = cappedRetry(parse, error, compiled, WIRE[format].capField);
        if (retryBody === undefined || signal?.aborted === true) throw error;
        lastCall = send(retryBody, requestOptions);
        return await lastCall;
      }
    };
    const run = async (): Promise<unknown> => {
      const context = contextFor(body);
      const handle = options.handleRecovery === true && body['stream'] !== true;
      const prepared = await terminator.prepare({
        request: body,
        context,
        signal,
        offer: options.offerRecoveryTool !== false,
        exchanges: handle,
        toolOutputs: options.reduceToolOutputs !== false,
        // Recorded here, once sent: the recovery tool and the recovery rounds are part of what it cost.
        record: terminator.account === undefined,
      });
      options.onDecisions?.(prepared.decisions);
      const compiled = prepared.request;
      const continuations: ProviderRequest[] = [];
      const record = (): void => {
        if (prepared.step !== undefined) terminator.account?.(prepared.step, { sent: compiled, continuations });
      };
      if (!handle || !offersRecoveryTool(compiled)) {
        record();
        return dispatch(compiled);
      }
      let out: Awaited<ReturnType<typeof runRecoveryLoop>>;
      try {
        out = await runRecoveryLoop({
          format,
          request: compiled,
          send: (request, round) => {
            if (round > 0) continuations.push(request);
            return dispatch(request);
          },
          bodyOf: (response) => response,
          answer: (call) => prepared.answer(call.arguments),
          // Each continuation goes through the pipeline again, so it fits the window as the first did.
          refit: (request) => prepared.refit(request, signal),
          ...(options.recoveryRounds === undefined ? {} : { maxRounds: options.recoveryRounds }),
        });
      } finally {
        record();
      }
      if (!out.serverSide) await prepared.remember(out.exchange).catch(() => undefined);
      return out.finalBody ?? out.response;
    };
    return withResponseExtras(run(), () => lastCall);
  };
  return override(target, 'create', wrapped);
}

function callContext(
  body: ProviderRequest,
  options: ClientWrapOptions,
  format: RecoveryWireFormat,
  defaultSession: string,
): StepContext & { readonly format: RecoveryWireFormat } {
  const sessionId =
    typeof options.sessionId === 'function' ? options.sessionId(body) : (options.sessionId ?? defaultSession);
  const baseRoute = typeof options.route === 'function' ? options.route(body) : options.route;
  const model = typeof body['model'] === 'string' ? body['model'] : undefined;
  const route: Route = { ...WIRE[format].route, ...definedFields({ model }), ...baseRoute };
  return { sessionId, requestId: options.requestId?.(body) ?? randomUUID(), route, format };
}

/** Keep `.asResponse()` / `.withResponse()` usable: they refer to the last dispatched call (the retry, when there was one). */
function withResponseExtras(
  run: Promise<unknown>,
  lastCall: () => Partial<ResponseExtras> | undefined,
): Promise<unknown> & Partial<ResponseExtras> {
  const promise = run as Promise<unknown> & Partial<ResponseExtras>;
  for (const name of ['asResponse', 'withResponse'] as const)
    promise[name] = async () => {
      await promise.catch(() => undefined);
      const last = lastCall();
      const method = last?.[name];
      if (method === undefined) throw new TypeError(`${name} is not available on this client`);
      return method.call(last);
    };
  return promise;
}

/** The request again with the smaller output cap a provider's error named, if it named one below the current cap. */
function cappedRetry(
  parse: (error: unknown) => number | undefined,
  error: unknown,
  compiled: ProviderRequest,
  capField: OutputCapField,
): ProviderRequest | undefined {
  let available: number | undefined;
  try {
    available = parse(error);
  } catch {
    return undefined; // a parser that throws names no cap
  }
  const current = readOutputCap(compiled);
  if (typeof available !== 'number' || !Number.isInteger(available) || available <= 0) return undefined;
  if (current !== undefined && available >= current) return undefined;
  return withOutputCap(compiled, outputCapField(compiled, capField), available);
}
