/**
 * `fitWindow`: the request stage between the compiler and the output cap that makes every request
 * fit its budgeting window W with the output reserve R, losslessly (docs/window.md).
 */
import { STAGES } from '../src/stages.js';
import { budgetCounterFrom } from '../src/budget/counter.js';
import { createOutputBudget, type OutputBudgetOptions } from '../src/budget/planner.js';
import type { ItemMeasures } from '../src/ledger/item-measures.js';
import { sessionStateFactory } from '../src/compile/session.js';
import { defaultInt } from '../src/config/index.js';
import type { TokenCounter } from '../src/measure/types.js';
import { stageOperator, type StageOperator } from '../src/operator-kit.js';
import { checkOptions, definedFields, intOption, requireVault } from '../src/options.js';
import type { ProviderRequest } from '../src/step.js';
import type { ArtifactStore, LeaseStore, SessionStore } from '../src/vault/ports.js';
import { fitRequest, type FitSettings } from '../src/window/fit-window.js';
import { DEFAULT_FIT_ORDER, DEFAULT_OVERSIZE_PCT, FIT_STEPS, type FitStep } from '../src/window/plan.js';

const STAGE = STAGES.fitWindow;

/** Options of {@link fitWindow}; only `vault` and `counter` are required. */
export interface FitWindowOptions {
  /** Where the exact text of every reduced slot is vaulted. Required. */
  readonly vault: ArtifactStore & LeaseStore & SessionStore;
  /** The counter of the incremental per-item counts (far from the boundary). Required. */
  readonly counter: TokenCounter;
  /** The per-item measurement memo the other request stages share. @defaultValue none: the stage's own */
  readonly measures?: ItemMeasures;
  /** The output budget's settings (W, R, exact counter) as `capOutputBudget` uses them. @defaultValue the route's */
  readonly budget?: OutputBudgetOptions;
  /** Low-water mark, in percent of W − R, a fit reduces the prompt to. @defaultValue `70` */
  readonly lowWaterPct?: number;
  /** Within this share of W (percent) the exact counter decides instead of the incremental counts. @defaultValue `5` */
  readonly exactMarginPct?: number;
  /** The reductions in order. @defaultValue `['reasoning', 'digest-idle', 'view', 'receipt']` */
  readonly order?: readonly FitStep[];
  /** Outputs shorter than this (code points) are never reduced. @defaultValue `600` (config `contextMinVaultChars`) */
  readonly minChars?: number;
  /** Turns without a reference after which an output is done with. @defaultValue `1` (config `workingSetIdleTurns`) */
  readonly idleTurns?: number;
  /** Budget of the failure lines a digest keeps (code points). @defaultValue `400` (config `digestDiagnosticChars`) */
  readonly diagnosticChars?: number;
  /** Budget of a bounded view of an oversized output (code points). @defaultValue `4000` */
  readonly viewChars?: number;
  /**
   * Safety margin, in percent of the counted prompt, when the route's provider counts with its own
   * tokenizer and the counter is a tiktoken encoding: the fit keeps prompt × (1 + margin) + R
   * within W. The public pre-Claude-3 vocabulary counts 8 % (sessions-e) to 27 % (sessions-a) more
   * than o200k, and no exact Claude 3+ tokenizer is public. 0 turns it off; never applied with the
   * provider's own counter (vLLM, tokenizer.json). @defaultValue `25`
   */
  readonly foreignMarginPct?: number;
  /** An output above this share of W − R (percent) gets a bounded view at the `view` step. @defaultValue `20` */
  readonly oversizePct?: number;
}

/** The exact count is the provider's own (vLLM, a tokenizer.json), not a tiktoken encoding standing in for it. */
function ownTokenizer(options: Pick<FitWindowOptions, 'counter' | 'budget'>): boolean {
  const b = options.budget;
  if (b?.counter !== undefined) return !b.counter.name.startsWith('tiktoken');
  if ((b?.backend ?? b?.config?.incontext.backend ?? 'tiktoken') !== 'tiktoken') return true;
  if ((b?.config?.tokenizerJson ?? '') !== '') return true;
  return !options.counter.name.startsWith('tiktoken');
}

/**
 * The foreign-tokenizer margin (percent) the fit applies with these options: 0 with a counter of the
 * provider's own, else `foreignMarginPct` (default 25). The preflight pressure uses the same.
 *
 * @example
 * fitForeignMarginPct({ counter }); // 25 with a tiktoken counter
 */
export function fitForeignMarginPct(
  options: Pick<FitWindowOptions, 'counter' | 'budget' | 'foreignMarginPct'>,
): number {
  return ownTokenizer(options) ? 0 : intOption(STAGE, 'foreignMarginPct', options.foreignMarginPct, 25, 0, 100);
}

/**
 * Make every request fit W − R without losing a byte: when prompt + R > W, reduce its history in the
 * documented order (old prose to receipts, bounded views, digests of done outputs, digests oldest
 * first, bare receipts) to the low-water mark; the prefix, user messages, actions and the newest
 * turn stay verbatim. A request that cannot fit passes unchanged with a `window_exceeded` decision.
 *
 * @example
 * requests$.pipe(compileRequest({ vault }), fitWindow({ vault, counter, budget: { route } }), capOutputBudget({ route }));
 */
export function fitWindow(options: FitWindowOptions): StageOperator<ProviderRequest> {
  requireVault(STAGE, options);
  checkOptions(STAGE, typeof options.counter?.count === 'function', 'options.counter is required (a TokenCounter)');
  const order = options.order ?? DEFAULT_FIT_ORDER;
  checkOptions(
    STAGE,
    Array.isArray(order) && order.length > 0 && order.every((o) => (FIT_STEPS as readonly string[]).includes(o)),
    `options.order must list some of ${FIT_STEPS.join(', ')}`,
  );
  const settings: FitSettings = {
    lowWaterPct: intOption(STAGE, 'lowWaterPct', options.lowWaterPct, defaultInt('windowLowWaterPct'), 10, 100),
    exactMarginPct: intOption(STAGE, 'exactMarginPct', options.exactMarginPct, 5, 0, 100),
    order,
    minChars: intOption(STAGE, 'minChars', options.minChars, defaultInt('contextMinVaultChars'), 100),
    idleTurns: intOption(STAGE, 'idleTurns', options.idleTurns, defaultInt('workingSetIdleTurns'), 1),
    diagnosticChars: intOption(
      STAGE,
      'diagnosticChars',
      options.diagnosticChars,
      defaultInt('digestDiagnosticChars'),
      0,
    ),
    viewChars: intOption(STAGE, 'viewChars', options.viewChars, 4000, 200),
    oversizePct: intOption(STAGE, 'oversizePct', options.oversizePct, DEFAULT_OVERSIZE_PCT, 1, 100),
    foreignMarginPct: fitForeignMarginPct(options),
  };
  const budget = createOutputBudget(STAGE, options.budget);
  const { counter, measures } = options;
  return stageOperator<ProviderRequest>({
    name: STAGE,
    open: () => {
      const run = budget.open();
      const estimator = budgetCounterFrom(counter, measures === undefined ? {} : { measures });
      const newState = sessionStateFactory({ vault: options.vault, counter, ...definedFields({ measures }) });
      return {
        reduce: (step, session, signal) => {
          session.fit ??= { session: newState(step.context), chosen: new Map(), blocks: new Map() };
          return fitRequest(step, session.fit, { run, estimator }, settings, signal);
        },
        close: () => run.close(),
      };
    },
  });
}
