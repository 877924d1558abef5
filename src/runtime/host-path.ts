/**
 * The host path: what every host does with a provider request before it goes upstream, written once
 * for the gateway, the client wrappers and the Agents JS input filter ({@link Terminator.prepare}).
 * In order: show the session's answered recovery rounds again (a recovered output rejoins the
 * working set), reduce the tool outputs the request shows for the first time and replay the
 * renderings of the others (src/session/tool-outputs.ts), run the request pipeline with room left
 * for the recovery tool, and offer that tool when the request carries a receipt (then for the rest
 * of the session, same place: the prefix stays cached). The host translates its types and decides
 * the wire format (`context.format`); everything else is here.
 */
import {
  loadRecoveryState,
  recordAlias,
  recordExchange,
  rejoinOutputs,
  saveRecoveryState,
  showExchanges,
} from '../recovery/exchanges.js';
import { carriesReceipt, offersRecoveryTool, withRecoveryTool } from '../recovery/formats.js';
import { capLoweredBy, recoveryToolTokens, refitContinuation } from '../recovery/fit.js';
import { answerRecoveryCall } from '../recovery/loop.js';
import { renderToolOutputs, type HostMemo, type ToolOutputResult } from '../session/tool-outputs.js';
import { isObj } from '../model/read.js';
import { STAGES } from '../stages.js';
import { errorLabel, sessionStateKey, type Decision, type ProviderRequest, type Step } from '../step.js';
import type { PrepareOptions, Prepared, Terminator } from './types.js';

/** `promise`, or undefined where it rejects when the host asked each part to fail open on its own. */
const settle = <T>(promise: Promise<T> | undefined, shared: boolean): Promise<T | undefined> | undefined =>
  shared ? promise : promise?.catch(() => undefined);

/** Prepare one request of a session whose host-path memo is `host` (see {@link Terminator.prepare}). */
export async function prepareHost(terminator: Terminator, options: PrepareOptions, host: HostMemo): Promise<Prepared> {
  const { request: client, context, signal } = options;
  const { format } = context;
  const shared = options.shared === true;
  const key = sessionStateKey(context);
  let state = await settle(options.exchanges === false ? undefined : loadRecoveryState(terminator.vault, key), shared);
  // A recovered output rejoins the working set: shown as the client sent it, its exchange not again.
  const { request: shown, rejoined } =
    state === undefined
      ? { request: client, rejoined: new Map<string, unknown>() }
      : showExchanges(client, format, state);
  const outputs: ToolOutputResult = (await settle(
    options.toolOutputs === false ? undefined : renderToolOutputs(terminator, shown, format, context, host, signal),
    shared,
  )) ?? { request: shown, changed: false, measured: shown, firstSeen: 0, saved: {}, failedOpen: [] };
  const offering = options.offer === true && !offersRecoveryTool(client);
  // The recovery tool may join the prompt after the pipeline: the window fit leaves room for it.
  const added = offering
    ? recoveryToolTokens(terminator.counter, client, withRecoveryTool(client, format, terminator.recoveryTool))
    : 0;
  let step: Step<ProviderRequest> | undefined;
  let decisions: readonly Decision[];
  try {
    step = await terminator.reduceRequest(
      outputs.request,
      added > 0 ? { ...context, addedPromptTokens: added } : context,
      signal,
      options.record === undefined ? undefined : { record: options.record },
    );
    decisions = step.decisions;
  } catch (error) {
    if (shared) throw error;
    decisions = [{ stage: 'runtime.prepare', kind: 'failed_open', reason: 'adapter error', error: errorLabel(error) }];
  }
  let request = rejoinOutputs(isObj(step?.value) ? step.value : outputs.request, format, rejoined);
  const offer = offering && (state?.tool === true || host.offered || carriesReceipt(request, format));
  if (offer) {
    const before = request;
    request = withRecoveryTool(request, format, terminator.recoveryTool);
    // The tool joins the prompt after the cap counted it (the window fit left room for it): its
    // tokens come off the cap the pipeline set, so prompt + cap still fits the window (and a
    // restart renders the same).
    const capped = decisions.some((d) => d.stage === STAGES.capOutputBudget && d.kind === 'applied');
    if (request !== before && capped)
      request = capLoweredBy(request, recoveryToolTokens(terminator.counter, before, request));
    if (shared && state !== undefined && !state.tool) {
      state = { ...state, tool: true };
      await saveRecoveryState(terminator.vault, key, state);
    }
    host.offered = true;
  }
  const changed = shown !== client || outputs.changed || request !== outputs.request || offer;
  return {
    request: changed ? request : client,
    changed,
    offered: offer,
    answer: (args) =>
      answerRecoveryCall(terminator.recoveryTool, args, { sessionId: context.sessionId, tenant: context.tenant ?? '' }),
    refit: (continued, refitSignal) => refitContinuation(terminator, context, refitSignal)(continued),
    remember: async (exchange, serverSide, alias) => {
      if (exchange.length === 0 || state === undefined) return;
      const recorded = recordExchange(state, client, format, exchange, serverSide);
      const next = alias === undefined ? recorded : recordAlias(recorded, alias);
      if (next !== state) await saveRecoveryState(terminator.vault, key, next);
    },
    context,
    step,
    decisions,
    failedOpen: outputs.failedOpen,
    staged: outputs.request,
    measured: shown === client ? outputs.measured : client,
  };
}
