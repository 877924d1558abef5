/** `capOutputBudget`: the last stage of the request stream. */
import { STAGES } from '../src/stages.js';
import { stageOperator, type StageOperator } from '../src/operator-kit.js';
import type { ProviderRequest, StepContext } from '../src/step.js';
import { createOutputBudget, type OutputBudgetOptions, type WindowLimits } from '../src/budget/planner.js';

/** Options of {@link capOutputBudget}: every field is optional; each default is documented on {@link OutputBudgetOptions}. */
export type CapOutputBudgetOptions = OutputBudgetOptions;

const STAGE = STAGES.capOutputBudget;

/**
 * Cap the output budget of each provider request against the budgeting window W:
 * required = min(R, B) or R; remaining = W − P; cap = min(remaining, B) or remaining, inserted
 * only when remaining ≥ required. Exactly one cap field is emitted (Chat Completions
 * `max_completion_tokens` — or `max_tokens` when the caller used it —, Responses
 * `max_output_tokens`, Anthropic and vLLM `max_tokens`) and the aliases are removed, also from
 * `extra_body`. Requests for another model, provider or endpoint pass unchanged. When exact
 * counting fails the rough estimate + F is used; when that fails too the request passes unchanged.
 * Throws ConfigError at build time for bad settings (unknown backend, F + R ≥ W, …).
 *
 * @example
 * requests$.pipe(capOutputBudget({ route: { model: 'gpt-5', contextWindow: 400_000 } }));
 */
export function capOutputBudget(options: CapOutputBudgetOptions = {}): StageOperator<ProviderRequest> {
  const budget = createOutputBudget(STAGE, options);
  return stageOperator<ProviderRequest>({
    name: STAGE,
    open: () => {
      // One budget (and, for registry backends, one counter with its HTTP agent and cache) per run.
      const run = budget.open();
      return { reduce: (step, _session, signal) => run.apply(step, signal), close: () => run.close() };
    },
  });
}

/** Preflight pressure function with its resources. */
export interface Pressure {
  (request: ProviderRequest, context?: StepContext, signal?: AbortSignal): Promise<number>;
  /** W and R for the request, as the cap resolves them (undefined: another route, or no window). */
  limits(request: ProviderRequest, context?: StepContext): WindowLimits | undefined;
  /** P as the cap counts it (undefined when counting failed twice). */
  count(request: ProviderRequest, context?: StepContext, signal?: AbortSignal): Promise<number | undefined>;
  close(): Promise<void>;
}

/**
 * Preflight pressure P + R − 1 for hosts that trigger compression themselves: it reaches W exactly
 * when W − P < R. Uses the same counting (and fallback + F) as the operator built from the same
 * options.
 *
 * @example
 * const pressure = createPressure({ route });
 * if ((await pressure(request)) >= W) host.compress();
 */
export function createPressure(options: CapOutputBudgetOptions = {}): Pressure {
  const run = createOutputBudget('createPressure', options).open();
  const fn = ((request: ProviderRequest, context?: StepContext, signal?: AbortSignal) =>
    run.pressure(request, context, signal)) as Pressure;
  fn.limits = (request, context) => run.limits(request, context);
  fn.count = (request, context, signal) => run.count(request, context, signal ?? new AbortController().signal);
  fn.close = () => run.close();
  return fn;
}
