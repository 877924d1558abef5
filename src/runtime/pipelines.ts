/**
 * The runtime's three pipelines (tool calls, tool results, provider requests): the operators
 * wired in their order from the config's mode. Stages the mode does not switch on are left out
 * entirely (identity), not skipped per element, so a disabled mode costs nothing.
 */
import { capOutputBudget } from '../../operators/cap-output-budget.js';
import { compileRequest } from '../../operators/compile-request.js';
import { fitWindow } from '../../operators/fit-window.js';
import type { FitStep } from '../window/plan.js';
import { type BudgetCounter } from '../budget/counter.js';
import type { ItemMeasures } from '../ledger/item-measures.js';
import type { Recognitions } from '../model/prefix.js';
import { reduceToolResult, type ReduceToolResultOptions } from '../../operators/reduce-tool-result.js';
import { collapseDuplicates } from '../../operators/collapse-duplicates.js';
import { routeSkills } from '../../operators/route-skills.js';
import { rewriteTerminalCommand } from '../../operators/rewrite-terminal-command.js';
import { modeFlags, pricingFor, type ModeFlags } from '../config/index.js';
import { conversationTerms } from '../compile/conversation-terms.js';
import { readRequest, stepFormat } from '../model/read.js';
import type { Config } from '../config/types.js';
import type { TokenCounter } from '../measure/types.js';
import type { WorkingStateStore } from '../vault/ports.js';
import { chainStages, type Stage, type StageOperator } from '../operator-kit.js';
import { definedFields } from '../options.js';
import { WeakMemo } from '../weak-memo.js';
import { errorLabel, note, type ProviderRequest, type Step, type ToolCall, type ToolResult } from '../step.js';
import type { Vault } from '../vault/types.js';

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
export function gateCounter(counter: TokenCounter, gates: ModeGates): { readonly counter?: TokenCounter } {
  return gates.tokenGate ? { counter } : {};
}

/**
 * The budget stage counts with the runtime's counter only for the tiktoken backend (same encoder,
 * no second copy); any other INCONTEXT_BACKEND (vllm /tokenize, tokenizer-json) is built by the
 * budget planner from the config, so the provider-aware count is the one that caps the output.
 */
export function budgetOptions(config: Config, counter: BudgetCounter): { config: Config; counter?: BudgetCounter } {
  return config.incontext.backend === 'tiktoken' && config.tokenizerJson === '' ? { config, counter } : { config };
}

export interface PipelineDeps {
  readonly config: Config;
  readonly vault: Vault;
  /** The real counter: the output cap counts the prompt with it. */
  readonly counter: TokenCounter;
  /** The output cap's counter over `counter` (shared by every session). */
  readonly budgetCounter: BudgetCounter;
  /** The per-item measurement memo the request stages share with the output cap and telemetry. */
  readonly measures?: ItemMeasures;
  /** The equalities the request stages recognise, shared with the measures and the output cap (src/model/prefix.ts). */
  readonly recognitions?: Recognitions;
  /** `{ counter }` for the reduction stages' acceptance gates, or `{}` (chars only; see gateCounter). */
  readonly gate: { readonly counter?: TokenCounter };
  readonly gates: ModeGates;
  readonly workingState?: WorkingStateStore;
  /** The focus terms of a Step's session's latest request, for the tool stage's views (src/compile/conversation-terms.ts). */
  readonly focus: (step: Step<ToolResult>) => readonly string[];
}

/**
 * Records the request's focus terms in its session, for the tool stage's views (the lines of a
 * large output that mention the names the conversation is about); never changes the request.
 */
const recordFocus: Stage<ProviderRequest> = {
  name: 'focus',
  open: () => ({
    reduce: (step, session) => {
      const view = readRequest(step.value, { format: stepFormat(step) });
      if (view.items.length > 0) session.focus = conversationTerms(view, (session.focusItems ??= new WeakMemo()));
      return undefined;
    },
  }),
};

/**
 * Pass-through mode (the vault could not be opened): no reduction stage runs, not even those that
 * need no vault, so the host sees its originals and one clear reason on every Step rather than a
 * partial pipeline whose behaviour depends on which stage touches the vault. The one exception is
 * the output cap on requests (passThroughRequests), which changes no content.
 */
export function passThrough<T>(failure: Error): Stage<T> {
  const decision = Object.freeze({
    stage: 'runtime',
    kind: 'failed_open',
    reason: 'vault_unavailable',
    error: errorLabel(failure),
  } as const);
  return { name: 'runtime', open: () => ({ reduce: (step) => note(step, decision) }) };
}

/**
 * Pass-through mode for requests: nothing is reduced, but the output cap still runs (it needs no
 * vault): the answer must fit the window whether or not the vault could be opened.
 */
export function passThroughRequests(d: PipelineDeps, failure: Error): Stage<ProviderRequest> {
  return chain([
    passThrough<ProviderRequest>(failure),
    d.gates.budget ? capOutputBudget(budgetOptions(d.config, d.budgetCounter)) : undefined,
  ]);
}

/** The stages switched on, one after the other (a stage left out is `undefined`). */
function chain<T>(parts: readonly (Stage<T> | StageOperator<T> | undefined)[]): Stage<T> {
  const stages = parts.flatMap((p) => (p === undefined ? [] : ['stage' in p ? p.stage : p]));
  return chainStages('runtime', stages);
}

export function toolCallPipeline(d: PipelineDeps): Stage<ToolCall> {
  if (!d.gates.terminal && !d.gates.suggest) return chain<ToolCall>([]);
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
  }).stage;
}

export function toolResultPipeline(d: PipelineDeps): Stage<ToolResult> {
  const c = d.config;
  const options: ReduceToolResultOptions = {
    vault: d.vault,
    ...d.gate,
    flags: d.gates,
    nativeMinChars: c.nativeMinChars,
    nativeMaxChars: c.nativeMaxChars,
    maxArtifactChars: c.maxArtifactChars,
    backends: c.backends,
    toolNames: c.toolNames,
    focus: d.focus,
    ...(d.measures === undefined ? {} : { measures: d.measures, digests: d.measures.digests }),
  };
  // One stage per result: the exact text is vaulted once, the delta beats the compact view.
  return chain<ToolResult>([
    d.gates.temporal || d.gates.native
      ? reduceToolResult({ ...options, scope: c.temporalScope, temporalMinChars: c.temporalMinChars })
      : undefined,
  ]);
}

export function requestPipeline(d: PipelineDeps): Stage<ProviderRequest> {
  if (!d.gates.compiler && !d.gates.budget) return chain<ProviderRequest>([]);
  const c = d.config;
  const { vault, gate } = d;
  const shared = definedFields({ measures: d.measures, recognitions: d.recognitions });
  const observations = c.observationPattern;
  return chain<ProviderRequest>([
    d.gates.compiler && d.gates.native ? recordFocus : undefined,
    d.gates.compiler
      ? collapseDuplicates({
          vault,
          ...gate,
          ...shared,
          minArtifactChars: c.minArtifactChars,
          maxArtifactChars: c.maxArtifactChars,
          maxInlineChars: c.maxInlineChars,
          observations,
        })
      : undefined,
    // Routing rewrites the instruction prefix: only as the explicit opt-in (docs/fidelity.md).
    d.gates.compiler && c.skillRouting ? routeSkills({ ...gate, vault }) : undefined,
    d.gates.compiler && c.contextCompaction
      ? compileRequest({
          vault,
          ...gate,
          ...shared,
          minVaultChars: c.contextMinVaultChars,
          maxArtifactChars: c.maxArtifactChars,
          inlineRecentTurns: c.contextInlineRecentTurns,
          inlineLeases: Math.max(1, c.inlineLeases),
          blockTurns: c.contextBlockTurns,
          requestsAhead: c.rewriteHorizonRequests,
          historyPolicy: c.historyPolicy,
          workingSetIdleTurns: c.workingSetIdleTurns,
          pricing: (step) => pricingFor(c, step.context.route, stepFormat(step)),
          digestDiagnosticChars: c.digestDiagnosticChars,
          reasoning: c.reasoningReduction,
          collapseAfterTurns: c.contextCollapseAfterTurns,
          observations,
          workingGraphChars: c.workingGraphChars,
          ...(d.workingState === undefined ? {} : { workingState: d.workingState }),
        })
      : undefined,
    // The window fit works on the compiled request; the cap that follows counts the fitted prompt.
    d.gates.compiler && c.windowFit
      ? fitWindow({
          vault,
          counter: d.counter,
          ...(d.measures === undefined ? {} : { measures: d.measures }),
          budget: budgetOptions(c, d.budgetCounter),
          lowWaterPct: c.windowLowWaterPct,
          order: c.windowFitOrder as readonly FitStep[],
          minChars: c.contextMinVaultChars,
          idleTurns: c.workingSetIdleTurns,
          diagnosticChars: c.digestDiagnosticChars,
        })
      : undefined,
    d.gates.budget ? capOutputBudget(budgetOptions(c, d.budgetCounter)) : undefined,
  ]);
}
