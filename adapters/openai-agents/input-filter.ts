/**
 * `callModelInputFilter`: the items the next model call will see, as a Responses request, through
 * the pipeline: tool results shown for the first time go through the tool-result stages (the SDK
 * runs the tools and hands their results to no other hook of ours, so the agent's tools need no
 * wrapping; each result is shown the same way in every later call), then the request stages. Only the model's view changes: the run's history (`result.history`) keeps
 * the original items. With a Session, the SDK persists the filtered items, so the vault (not the
 * session) is where exact originals live.
 */
import { randomUUID } from 'node:crypto';
import type { CallModelInputFilter, CallModelInputFilterArgs, ModelInputData } from '@openai/agents';
import type { Terminator } from '../../src/runtime/types.js';
import { definedFields } from '../../src/options.js';
import type { Decision, ProviderRequest, Route, Step } from '../../src/step.js';
import { readOutputCap } from '../shared/functions.js';
import { WIRE } from '../shared/wire.js';
import type { CapLedger } from './cap-ledger.js';
import { fromResponsesInput, toResponsesInput } from './items.js';

/** Options of {@link createInputFilter}; only `resolveSession` is required. */
export interface InputFilterOptions {
  /** Session id for the run context (required). */
  readonly resolveSession: (context: unknown) => string;
  /** Route fields (contextWindow, outputCap, ...). @defaultValue the agent's model name only */
  readonly route?: Route | undefined;
  /** Where the cap goes for the Model wrapper. @defaultValue nowhere (no cap) */
  readonly ledger?: CapLedger | undefined;
  /** The run's AbortSignal: aborting it drops the compile in flight. @defaultValue none */
  readonly signal?: AbortSignal | undefined;
  /** Content-free decisions of every compile (metrics). @defaultValue none */
  readonly onDecisions?: ((decisions: readonly Decision[]) => void) | undefined;
  /**
   * Send tool results shown for the first time through the tool-result stages (results of tools
   * wrapped with `wrapTool` are already reduced and left as they are).
   *
   * @defaultValue true
   */
  readonly reduceToolOutputs?: boolean | undefined;
}

/**
 * The agent's function tools as the Responses API lists them: the filter never changes them, but
 * the model gets them, so the request's record measures them (the recovery tool as ours).
 */
function agentTools(agent: unknown): Record<string, unknown>[] {
  const tools = (agent as { tools?: unknown } | null)?.tools;
  if (!Array.isArray(tools)) return [];
  return (tools as unknown[])
    .filter(
      (t): t is Record<string, unknown> =>
        t !== null && typeof t === 'object' && (t as { type?: unknown }).type === 'function',
    )
    .map(({ name, description, parameters, strict }) => ({ type: 'function', name, description, parameters, strict }));
}

/** A Step whose requests list `tools` (for its record only: the stages never saw them). */
function withTools(step: Step<ProviderRequest>, tools: readonly unknown[]): Step<ProviderRequest> {
  if (tools.length === 0) return step;
  const original = { ...step.original, tools };
  return { ...step, original, value: step.value === step.original ? original : { ...step.value, tools } };
}

/** Model name and requested output cap as the agent declares them. */
function agentFacts(agent: unknown): { model?: string; maxTokens?: number } {
  const a = (agent ?? {}) as { model?: unknown; modelSettings?: { maxTokens?: unknown } };
  const model = typeof a.model === 'string' && a.model !== '' ? a.model : undefined;
  const maxTokens = typeof a.modelSettings?.maxTokens === 'number' ? a.modelSettings.maxTokens : undefined;
  return { ...(model === undefined ? {} : { model }), ...(maxTokens === undefined ? {} : { maxTokens }) };
}

/**
 * A `callModelInputFilter` that runs each model call's input through the request pipeline and gives
 * back the compiled items (the input unchanged on any failure), recording the cap in `ledger`.
 *
 * @example
 * const runner = new Runner({ callModelInputFilter: createInputFilter(terminator, { resolveSession: () => 'run-1' }) });
 */
export function createInputFilter(terminator: Terminator, options: InputFilterOptions): CallModelInputFilter {
  const filter = async ({ modelData, agent, context }: CallModelInputFilterArgs): Promise<ModelInputData> => {
    try {
      const facts = agentFacts(agent);
      const conversion = toResponsesInput(modelData.input);
      const request: Record<string, unknown> = { input: conversion.input };
      if (facts.model !== undefined) request['model'] = facts.model;
      if (modelData.instructions !== undefined) request['instructions'] = modelData.instructions;
      if (facts.maxTokens !== undefined) request['max_output_tokens'] = facts.maxTokens;
      const route: Route = { ...WIRE.responses.route, ...definedFields({ model: facts.model }), ...options.route };
      const sessionId = options.resolveSession(context);
      const prepared = await terminator.prepare({
        request,
        context: { sessionId, requestId: randomUUID(), route, format: 'responses' },
        signal: options.signal,
        exchanges: false,
        toolOutputs: options.reduceToolOutputs !== false,
        record: terminator.account === undefined,
      });
      if (prepared.step !== undefined) terminator.account?.(withTools(prepared.step, agentTools(agent)));
      options.onDecisions?.(prepared.decisions);
      const cap = readOutputCap(prepared.request);
      if (!prepared.changed || !Array.isArray(prepared.request['input'])) {
        options.ledger?.record(modelData.input, cap, sessionId);
        return modelData;
      }
      const input = fromResponsesInput(prepared.request['input'] as unknown[], conversion);
      options.ledger?.record(input, cap, sessionId);
      const instructions = prepared.request['instructions'];
      return typeof instructions === 'string'
        ? { input, instructions }
        : modelData.instructions === undefined
          ? { input }
          : { input, instructions: modelData.instructions };
    } catch {
      return modelData;
    }
  };
  // The pipeline never mutates its input, so the SDK may skip its defensive deep clone.
  return Object.assign(filter, { preserveInputIdentity: true });
}
