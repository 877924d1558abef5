/**
 * One object that wires a Terminator into an OpenAI Agents JS setup: the input filter (compile),
 * the Model wrapper (cap), the tool wrapper (tool stream) and the recovery tool share one session
 * resolver and one cap ledger.
 */
import type { CallModelInputFilter, FunctionTool, Model, ModelProvider } from '@openai/agents';
import type { Terminator } from '../../src/runtime/types.js';
import type { Decision, Route } from '../../src/step.js';
import { CapLedger } from './cap-ledger.js';
import { createInputFilter } from './input-filter.js';
import { wrapModel, wrapModelProvider } from './model.js';
import { agentsRecoveryTool } from './recovery-tool.js';
import { agentsSessionResolver, type AgentsSessionOptions } from './session-id.js';
import { wrapTool } from './tool-wrapper.js';

/** Options of {@link createAgentsAdapter}. */
export interface AgentsAdapterOptions extends AgentsSessionOptions {
  /** Route fields for every request (contextWindow, outputCap, ...). @defaultValue the agent's model name only */
  readonly route?: Route;
  /** Content-free decisions of every compile (metrics). @defaultValue none */
  readonly onDecisions?: (decisions: readonly Decision[]) => void;
  /**
   * When a request carries a receipt and the agent lacks `token_terminator`, the wrapped model
   * offers it and answers the model's calls itself.
   *
   * @defaultValue true
   */
  readonly offerRecoveryTool?: boolean;
  /**
   * Send tool results shown for the first time through the tool-result stages in the input filter,
   * so the agent's tools need no wrapping (results of `wrapTool` tools are left as they are).
   *
   * @defaultValue true
   */
  readonly reduceToolOutputs?: boolean;
  /** Recovery rounds the wrapped model answers per call. @defaultValue 3 */
  readonly recoveryRounds?: number;
}

/** The pieces {@link createAgentsAdapter} returns: the input filter, the model and tool wrappers and the recovery tool, all sharing one cap ledger. */
export interface AgentsAdapter {
  /** A filter without a run signal (for `new Runner({ callModelInputFilter })`). */
  readonly callModelInputFilter: CallModelInputFilter;
  /** Per-run options: spread into `run(agent, input, { ...tt.runOptions({ signal }) })`. */
  runOptions(options?: { signal?: AbortSignal }): { callModelInputFilter: CallModelInputFilter; signal?: AbortSignal };
  /** The model with the recorded output cap applied to each call and, when offered, recovery calls answered. */
  wrapModel<M extends Model>(model: M): M;
  /** A provider whose every model is wrapped as by `wrapModel`. */
  wrapModelProvider(provider: ModelProvider): ModelProvider;
  /** The function tool with its string results sent through the tool stream (other tools and the recovery tool are returned as they are). */
  wrapTool<T>(tool: T): T;
  /** Every tool wrapped as by `wrapTool`. */
  wrapTools<T>(tools: readonly T[]): T[];
  /** The `token_terminator` recovery tool for the agent's tool list. */
  readonly recoveryTool: FunctionTool<unknown, never, string>;
}

/**
 * Everything the OpenAI Agents SDK needs to run an agent through the pipeline: an input filter
 * that compiles each model call, model and tool wrappers, and the recovery tool.
 *
 * @example
 * const tt = createAgentsAdapter(terminator, { route: { contextWindow: 128_000 } });
 * const agent = new Agent({ name: 'a', model: tt.wrapModel(model), tools: [...tools, tt.recoveryTool] });
 * const result = await run(agent, 'go', { context: { sessionId: 's1' }, ...tt.runOptions({ signal }) });
 */
export function createAgentsAdapter(terminator: Terminator, options: AgentsAdapterOptions = {}): AgentsAdapter {
  const resolveSession = agentsSessionResolver(options);
  const ledger = new CapLedger();
  const recovery =
    options.offerRecoveryTool === false
      ? undefined
      : { terminator, ...(options.recoveryRounds === undefined ? {} : { rounds: options.recoveryRounds }) };
  const filterFor = (signal?: AbortSignal): CallModelInputFilter =>
    createInputFilter(terminator, {
      resolveSession,
      route: options.route,
      ledger,
      signal,
      onDecisions: options.onDecisions,
      reduceToolOutputs: options.reduceToolOutputs,
    });
  return {
    callModelInputFilter: filterFor(),
    runOptions: (run = {}) =>
      run.signal === undefined
        ? { callModelInputFilter: filterFor() }
        : { callModelInputFilter: filterFor(run.signal), signal: run.signal },
    wrapModel: (model) => wrapModel(model, ledger, recovery),
    wrapModelProvider: (provider) => wrapModelProvider(provider, ledger, recovery),
    wrapTool: (tool) => wrapTool(tool, terminator, resolveSession),
    wrapTools: (tools) => tools.map((tool) => wrapTool(tool, terminator, resolveSession)),
    recoveryTool: agentsRecoveryTool(terminator, resolveSession),
  };
}
