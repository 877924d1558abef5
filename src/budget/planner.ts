/**
 * The output budget as one object shared by the `capOutputBudget` operator and the preflight
 * `pressure` function, so both use the same counter, reserve and window.
 */
import type { Config } from '../config/types.js';
import { normalizeModelName } from '../measure/index.js';
import type { TokenCounter } from '../measure/types.js';
import { checkContextLimit, defaultInt } from '../config/index.js';
import { definedFields, intOption } from '../options.js';
import { advance, errorLabel, note, type ProviderRequest, type Route, type Step, type StepContext } from '../step.js';
import { checkBudgetSettings, effectiveReserve, planOutputCap, preflightPressure } from './arithmetic.js';
import {
  BudgetCounterError,
  budgetCounterFrom,
  isBudgetCounter,
  roughRequestTokens,
  type BudgetCounter,
} from './counter.js';
import { defaultCounterRegistry, type BackendSettings, type CounterRegistry } from './registry.js';
import {
  BUILT_IN_MODEL_LIMITS,
  canonicalModelId,
  checkModelLimits,
  createModelLimits,
  modelLimitsHint,
  type ModelLimitsTable,
} from './model-limits.js';
import {
  capFieldFor,
  CAP_FIELDS,
  detectRequestFormat,
  extraBody,
  readCallerCap,
  withOutputCap,
  type CapDialect,
} from './request-caps.js';

/**
 * Options of the output budget (`capOutputBudget`, `createPressure`). Every field is optional. R
 * (`minOutputTokens`), F (`fallbackMarginTokens`), the W override (`compressionWindowTokens`; without
 * it the route's compressionThreshold, else its contextWindow) and the budget report's limit, reserve
 * and margin are the Config fields of the same name: each defaults to `config`'s, else Config's default.
 */
export interface OutputBudgetOptions
  extends
    Partial<Pick<Config['incontext'], 'minOutputTokens' | 'fallbackMarginTokens' | 'compressionWindowTokens'>>,
    Partial<Pick<Config, 'contextLimitTokens' | 'outputReserveTokens' | 'tokenSafetyMargin'>> {
  /** Source of the incontext settings and tokenizer choice below. @defaultValue none (built-in defaults) */
  readonly config?: Pick<Config, 'incontext' | 'tokenizerJson' | 'tiktokenEncoding'> &
    Partial<Pick<Config, 'modelLimits' | 'contextLimitTokens' | 'outputReserveTokens' | 'tokenSafetyMargin'>>;
  /**
   * The configured primary route (model, provider, endpoint, contextWindow, compressionThreshold,
   * outputCap). Requests for another model, provider or endpoint pass unchanged.
   * @defaultValue each Step's own `context.route` (then only the request's `model` is compared with it)
   */
  readonly route?: Route;
  /** The exact counter (the caller owns it). @defaultValue the registry backend named by `backend` */
  readonly counter?: BudgetCounter | TokenCounter;
  /** Name of the counting backend in the registry (INCONTEXT_BACKEND). @defaultValue config, else `tiktoken` */
  readonly backend?: string;
  /** Where `backend` is looked up. @defaultValue the process-wide registry (`registerCounter`) */
  readonly registry?: CounterRegistry;
  /** Settings for the backend factory, over those derived from `config` and `route`. @defaultValue none */
  readonly backendSettings?: BackendSettings;
  /** Fallback estimate when exact counting fails (F is added). @defaultValue ceil(chars / 4) of the prompt parts */
  readonly fallback?: (request: ProviderRequest) => number;
  /**
   * Context window and output ceiling per model id, over the built-in table (src/budget/model-limits.ts).
   * The route's own `contextWindow` / `maxOutputTokens` win over both.
   * @defaultValue config `modelLimits`, else none
   */
  readonly modelLimits?: ModelLimitsTable;
  /** Server dialect for the cap field. @defaultValue `vllm` when the backend or route provider is vLLM, else `openai` */
  readonly dialect?: CapDialect;
  /** Metrics sink: counts, labels and error codes only, never content. @defaultValue none */
  readonly onMeasure?: (measurement: BudgetMeasurement) => void;
}

/** One budgeting outcome, content-free. */
export interface BudgetMeasurement {
  readonly outcome: 'capped' | 'unchanged' | 'insufficient_room' | 'counting_failed';
  readonly window: number;
  readonly reserve: number;
  readonly prompt?: number;
  readonly callerCap?: number;
  /** The tightest wire-level output limit (the model's ceiling, `route.outputCap`), when one applies. */
  readonly outputLimit?: number;
  readonly cap?: number;
  readonly counter: string;
  /** Error label of the exact counter's failure when the fallback estimate was used. */
  readonly fallback?: string;
  /** The budget report, when a context limit is configured (`contextLimitTokens`). */
  readonly contextBudget?: ContextBudget;
}

/** The usable budget under a configured context limit and what one prompt leaves of it. */
export interface ContextBudget {
  /** The configured context limit L. */
  readonly limit: number;
  /** L − output reserve − safety margin. */
  readonly usable: number;
  /** The prompt tokens counted (with the fallback margin when exact counting failed). */
  readonly prompt: number;
  /** usable − prompt; negative when the prompt is over the usable budget (reported, never truncated). */
  readonly headroom: number;
}

/**
 * The budget report's numbers: usable = limit − reserve − margin, headroom = usable − prompt.
 *
 * @example
 * contextBudget(32_000, 4096, 512, 20_000); // { limit: 32_000, usable: 27_392, prompt: 20_000, headroom: 7_392 }
 */
export function contextBudget(limit: number, reserve: number, margin: number, prompt: number): ContextBudget {
  const usable = limit - reserve - margin;
  return { limit, usable, prompt, headroom: usable - prompt };
}

/** The window W a request must fit with the output reserve R (see {@link BudgetRun.limits}). */
export interface WindowLimits {
  readonly window: number;
  readonly reserve: number;
}

/** A per-subscription budget: its own counter instance when built from the registry. */
export interface BudgetRun {
  apply(step: Step<ProviderRequest>, signal: AbortSignal): Promise<Step<ProviderRequest>>;
  pressure(request: ProviderRequest, context?: StepContext, signal?: AbortSignal): Promise<number>;
  /**
   * The W and R the cap uses for this request: undefined for another route or when no window is
   * known (the window-fit stage reads the same numbers as the cap that follows it).
   */
  limits(request: ProviderRequest, context?: StepContext): WindowLimits | undefined;
  /** P as the cap counts it (the fallback estimate + F when exact counting fails); undefined when both fail. */
  count(request: ProviderRequest, context: StepContext | undefined, signal: AbortSignal): Promise<number | undefined>;
  close(): Promise<void>;
}

/** The output-cap planner built from {@link OutputBudgetOptions}; `open` starts one subscription's run. */
export interface OutputBudget {
  open(): BudgetRun;
}

const sameModel = (a: string, b: string): boolean => normalizeModelName(a) === normalizeModelName(b);
const sameEndpoint = (a: string, b: string): boolean =>
  a.trim().replace(/\/+$/, '').toLowerCase() === b.trim().replace(/\/+$/, '').toLowerCase();

/**
 * The route rule: only requests for the configured primary route are budgeted.
 *
 * @example
 * isPrimaryRoute({ model: 'gpt-4o-mini' }, { model: 'gpt-4o' }, undefined); // false: another model
 */
export function isPrimaryRoute(request: ProviderRequest, primary: Route | undefined, own: Route | undefined): boolean {
  const model = typeof request['model'] === 'string' ? request['model'] : own?.model;
  if (primary?.model !== undefined && model !== undefined && !sameModel(model, primary.model)) return false;
  if (primary !== undefined && primary !== own && own !== undefined) {
    if (
      primary.provider !== undefined &&
      own.provider !== undefined &&
      primary.provider.toLowerCase() !== own.provider.toLowerCase()
    )
      return false;
    if (primary.endpoint !== undefined && own.endpoint !== undefined && !sameEndpoint(primary.endpoint, own.endpoint))
      return false;
  }
  return true;
}

/** The validated settings of {@link createOutputBudget}, shared by every run it opens. */
type Budgeting = ReturnType<typeof budgeting>;

function budgeting(who: string, options: OutputBudgetOptions) {
  const inc = options.config?.incontext;
  const reserve = options.minOutputTokens ?? inc?.minOutputTokens ?? 4096;
  const margin = options.fallbackMarginTokens ?? inc?.fallbackMarginTokens ?? 1024;
  const override = options.compressionWindowTokens ?? inc?.compressionWindowTokens;
  const reportOption = (key: 'contextLimitTokens' | 'outputReserveTokens' | 'tokenSafetyMargin'): number =>
    intOption(who, key, options[key] ?? options.config?.[key], defaultInt(key), 0);
  const report = {
    contextLimitTokens: reportOption('contextLimitTokens'),
    outputReserveTokens: reportOption('outputReserveTokens'),
    tokenSafetyMargin: reportOption('tokenSafetyMargin'),
  };
  checkContextLimit(report, {
    api: who,
    reserve: 'options.outputReserveTokens',
    margin: 'options.tokenSafetyMargin',
    limit: 'options.contextLimitTokens',
    hint: ' (TOKEN_TERMINATOR_OUTPUT_RESERVE_TOKENS, _TOKEN_SAFETY_MARGIN, _CONTEXT_LIMIT_TOKENS)',
  });
  const route = options.route;
  const staticWindow = override ?? route?.compressionThreshold ?? route?.contextWindow;
  checkBudgetSettings(who, {
    window: staticWindow,
    contextWindow: route?.contextWindow,
    reserve,
    fallbackMargin: margin,
  });
  const backend = options.backend ?? inc?.backend ?? 'tiktoken';
  const settings: BackendSettings = {
    ...(inc !== undefined && {
      tokenizerUrl: inc.tokenizerUrl,
      tokenizerTimeoutSeconds: inc.tokenizerTimeoutSeconds,
      tokenizerUserAgent: inc.tokenizerUserAgent,
    }),
    ...(options.config?.tokenizerJson !== undefined && { tokenizerJson: options.config.tokenizerJson }),
    ...(options.config?.tiktokenEncoding !== undefined && { tiktokenEncoding: options.config.tiktokenEncoding }),
    ...(route?.contextWindow !== undefined && { contextLength: route.contextWindow }),
    ...(route?.model !== undefined && { model: route.model }),
    ...options.backendSettings,
  };
  const factory =
    options.counter === undefined ? (options.registry ?? defaultCounterRegistry).factory(backend) : undefined;
  // Validate the backend's settings now (startup error), then discard: factories open nothing.
  if (factory !== undefined) void factory(settings).close?.();
  const fallback = options.fallback ?? roughRequestTokens;
  const table: ModelLimitsTable = { ...options.config?.modelLimits, ...options.modelLimits };
  checkModelLimits(`${who}: modelLimits (TOKEN_TERMINATOR_MODEL_LIMITS)`, table);
  const limitsOf = createModelLimits(table);
  return {
    who,
    route,
    onMeasure: options.onMeasure,
    dialect: options.dialect,
    counter: options.counter,
    /** Output tokens kept free, and the margin added to an inexact or fallback count. */
    reserve,
    margin,
    /** The compression window that overrides the route's, if set. */
    override,
    /** The context budget report's limit, reserve and margin (limit 0: no report). */
    report,
    backend,
    settings,
    factory,
    fallback,
    limitsOf,
  };
}

/** The prompt's tokens by the counter (plus the margin when inexact), else by the fallback plus the margin. */
async function measurePrompt(
  b: Budgeting,
  counter: BudgetCounter,
  request: ProviderRequest,
  signal: AbortSignal,
  contextLength: number | undefined,
): Promise<{ readonly prompt: number; readonly fallback?: string } | undefined> {
  let failure: unknown;
  try {
    const p = await counter.countRequest(request, signal, { contextLength });
    if (!Number.isSafeInteger(p) || p < 0)
      throw new BudgetCounterError('internal', 'counter returned an invalid count');
    if (counter.exact) return { prompt: p };
    return { prompt: p + b.margin, fallback: 'inexact' };
  } catch (error) {
    if (signal.aborted) throw error;
    failure = error;
  }
  try {
    return { prompt: b.fallback(request) + b.margin, fallback: errorLabel(failure) };
  } catch {
    return undefined;
  }
}

/** The route with the model table filled in: its own fields win, then config overrides, then the built-in entry. */
function resolveRoute(b: Budgeting, r: Route | undefined, request: ProviderRequest): Route | undefined {
  const model = typeof request['model'] === 'string' ? request['model'] : r?.model;
  const known = b.limitsOf(model);
  // A guess from a similar name (a newer model of a known family) never lowers what the caller asked.
  if (known === undefined || (known.inferredFrom !== undefined && readCallerCap(request) !== undefined)) return r;
  const { contextWindow, maxOutputTokens } = known;
  return { ...definedFields({ contextWindow, maxOutputTokens }), ...r };
}

/** A `measured` decision with {@link modelLimitsHint}'s hint when the route gives no window of its own. */
function hintModel(b: Budgeting, step: Step<ProviderRequest>, route: Route | undefined): Step<ProviderRequest> {
  const model = typeof step.value['model'] === 'string' ? step.value['model'] : route?.model;
  if (
    model === undefined ||
    model.trim() === '' ||
    route?.contextWindow !== undefined ||
    route?.compressionThreshold !== undefined ||
    b.override !== undefined
  )
    return step;
  const hint = modelLimitsHint(model, b.limitsOf(model));
  return hint === undefined ? step : note(step, { stage: b.who, kind: 'measured', reason: hint });
}

/** One run's counter and cap dialect. */
interface RunCounter {
  readonly counter: BudgetCounter;
  readonly dialect: CapDialect | undefined;
}

/** The budget report (a `measured` decision) once the prompt is counted, when a limit is set. */
function reportBudget(
  b: Budgeting,
  step: Step<ProviderRequest>,
  prompt: number,
): { step: Step<ProviderRequest>; budget?: ContextBudget } {
  const { contextLimitTokens: limit, outputReserveTokens: reserve, tokenSafetyMargin: margin } = b.report;
  if (limit === 0) return { step };
  const budget = contextBudget(limit, reserve, margin, prompt);
  const reason =
    `context budget: prompt ${budget.prompt} of ${budget.usable} usable tokens ` +
    `(limit ${budget.limit} − output reserve ${reserve} − safety margin ${margin}), ` +
    (budget.headroom >= 0 ? `${budget.headroom} left` : `${-budget.headroom} over (not truncated)`);
  return { step: note(step, { stage: b.who, kind: 'measured', reason }), budget };
}

async function applyBudget(
  b: Budgeting,
  { counter, dialect }: RunCounter,
  given: Step<ProviderRequest>,
  signal: AbortSignal,
): Promise<Step<ProviderRequest>> {
  const stage = b.who;
  const { route, onMeasure } = b;
  let step = given;
  const request = step.value;
  const own = step.context.route;
  const resolved = primaryWindow(b, request, own);
  if (resolved === undefined) return note(step, { stage, kind: 'skipped', reason: 'other route' });
  const { primary, window } = resolved;
  step = hintModel(b, step, route ?? own);
  const format = step.context.format ?? detectRequestFormat(request, primary?.provider);
  const field = capFieldFor(
    format,
    request,
    dialect ?? (primary?.provider?.toLowerCase() === 'vllm' ? 'vllm' : 'openai'),
  );
  if (field === undefined) return note(step, { stage, kind: 'skipped', reason: 'unknown request format' });
  if (window === undefined) {
    // No window to cap against: the budget report still counts, when one is configured.
    if (b.report.contextLimitTokens > 0) {
      const m = await measurePrompt(b, counter, request, signal, (route ?? own)?.contextWindow);
      if (m !== undefined) step = reportBudget(b, step, m.prompt).step;
    }
    return note(step, { stage, kind: 'skipped', reason: 'no budgeting window' });
  }
  if (b.margin + b.reserve >= window)
    return note(step, { stage, kind: 'skipped', reason: 'window below reserve + margin' });
  const r = effectiveReserve(b.reserve, primary?.outputCap);
  const callerCap = readCallerCap(request);
  const base = { window, reserve: r, counter: counter.name, ...(callerCap !== undefined && { callerCap }) };
  const measured = await measurePrompt(b, counter, request, signal, (route ?? own)?.contextWindow);
  if (measured === undefined) {
    onMeasure?.({ ...base, outcome: 'counting_failed' });
    return note(step, {
      stage,
      kind: 'failed_open',
      reason: 'counting failed',
      error: 'BudgetCounterError:E_COUNTER_BOTH',
    });
  }
  const reported = reportBudget(b, step, measured.prompt);
  step = reported.step;
  const budget = reported.budget;
  const plan = planOutputCap({ window, prompt: measured.prompt, reserve: r, callerCap });
  const outputLimit = tightest(primary?.maxOutputTokens, primary?.outputCap);
  const { prompt, fallback } = measured;
  const extra = { prompt, ...definedFields({ fallback, outputLimit, contextBudget: budget }) };
  const error = measured.fallback !== undefined && measured.fallback !== 'inexact' ? { error: measured.fallback } : {};
  const skip = (reason: string, outcome: BudgetMeasurement['outcome'], cap?: number): Step<ProviderRequest> => {
    onMeasure?.({ ...base, ...extra, ...(cap === undefined ? {} : { cap }), outcome });
    return note(step, { stage, kind: 'skipped', reason, ...error });
  };
  if (plan.cap === undefined) return skip('remaining below required output', 'insufficient_room');
  // incontext: any further wire-level output limit must also leave at least required_output.
  if (outputLimit !== undefined && outputLimit < plan.required)
    return skip('output limit below required output', 'insufficient_room');
  const cap = outputLimit === undefined ? plan.cap : Math.min(plan.cap, outputLimit);
  // Where the client sent no cap, one is added only when it limits: OpenAI's Responses API gives
  // its models their published ceiling, so a cap at it changes nothing but the request's size.
  // Elsewhere the default is unknown or lower (DeepSeek 4,096 of 8,192, older vLLM 16; Anthropic
  // requires a cap).
  const providerDefault = format === 'responses' ? openAiDefaultOutput(primary?.provider, request) : undefined;
  if (callerCap === undefined && providerDefault !== undefined && cap >= providerDefault)
    return skip('cap would not bind', 'unchanged', cap);
  if (hasOnlyCap(request, field, cap)) return skip('already capped', 'unchanged', cap);
  onMeasure?.({ ...base, ...extra, cap, outcome: 'capped' });
  const reason = measured.fallback === undefined ? 'capped' : 'capped (fallback count)';
  return advance(step, withOutputCap(request, field, cap), { stage, kind: 'applied', reason, ...error });
}

/**
 * Validate the options (ConfigError naming the variable) and return a factory of per-run budgets.
 *
 * @example
 * const run = createOutputBudget('myHost', { route: { model: 'gpt-5', contextWindow: 400_000 } }).open();
 */
export function createOutputBudget(who: string, options: OutputBudgetOptions = {}): OutputBudget {
  const b = budgeting(who, options);
  return {
    open(): BudgetRun {
      const owned = b.factory?.(b.settings);
      const given = b.counter;
      const counter: BudgetCounter =
        owned ?? (given !== undefined && !isBudgetCounter(given) ? budgetCounterFrom(given) : (given as BudgetCounter));
      const dialect = b.dialect ?? (b.backend === 'vllm' || counter.name === 'vllm' ? 'vllm' : undefined);
      const run: RunCounter = { counter, dialect };
      const count: BudgetRun['count'] = async (request, context, signal) =>
        (await measurePrompt(b, counter, request, signal, (b.route ?? context?.route)?.contextWindow))?.prompt;
      return {
        apply: (step, signal) => applyBudget(b, run, step, signal),
        limits: (request, context) => windowLimits(b, request, context?.route),
        count,
        async pressure(request, context, signal = new AbortController().signal) {
          const reserve = effectiveReserve(b.reserve, (b.route ?? context?.route)?.outputCap);
          // Both estimators failed: report no pressure rather than throwing at the host.
          return preflightPressure((await count(request, context, signal)) ?? 0, reserve);
        },
        close: async () => {
          await owned?.close?.();
        },
      };
    },
  };
}

/** The primary route with its model limits filled in, and the window W: undefined for another route. */
function primaryWindow(
  b: Budgeting,
  request: ProviderRequest,
  own: Route | undefined,
): { readonly primary: Route | undefined; readonly window: number | undefined } | undefined {
  if (!isPrimaryRoute(request, b.route ?? own, own)) return undefined;
  const primary = resolveRoute(b, b.route ?? own, request);
  return { primary, window: b.override ?? primary?.compressionThreshold ?? primary?.contextWindow };
}

/** W and R for one request, resolved as {@link applyBudget} resolves them. */
function windowLimits(b: Budgeting, request: ProviderRequest, own: Route | undefined): WindowLimits | undefined {
  const resolved = primaryWindow(b, request, own);
  const window = resolved?.window;
  if (window === undefined || b.margin + b.reserve >= window) return undefined;
  return { window, reserve: effectiveReserve(b.reserve, resolved?.primary?.outputCap) };
}

function hasOnlyCap(request: ProviderRequest, field: string, cap: number): boolean {
  if (request[field] !== cap) return false;
  const extra = extraBody(request);
  return CAP_FIELDS.every((f) => (f === field || request[f] === undefined) && (extra === undefined || !(f in extra)));
}

/** OpenAI's own models, by canonical id (GPT, the o-series, Codex). */
const OPENAI_MODEL = /^(?:gpt-|chatgpt-|o\d|codex-)/;

/** The output limit OpenAI's Responses API gives its own model when the request names none: its published ceiling. */
function openAiDefaultOutput(provider: string | undefined, request: ProviderRequest): number | undefined {
  if (provider !== undefined && provider.toLowerCase() !== 'openai') return undefined;
  const model = request['model'];
  if (typeof model !== 'string' || !OPENAI_MODEL.test(canonicalModelId(model))) return undefined;
  const known = BUILT_IN_MODEL_LIMITS[canonicalModelId(model)];
  return known?.maxOutputTokens;
}

/** The smallest positive of the given limits, or undefined when none is set. */
function tightest(...limits: readonly (number | undefined)[]): number | undefined {
  let best: number | undefined;
  for (const l of limits) if (l !== undefined && l > 0 && (best === undefined || l < best)) best = l;
  return best;
}
