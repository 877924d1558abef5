/**
 * Preflight pressure with the window fit in the pipeline (docs/window.md): at or above W only when
 * even the least the fit can leave does not fit its room, else what the fit will bring the prompt
 * to, below W, so a host that compacts at W compacts only when the fit cannot make room.
 */
import { preflightPressure } from '../budget/arithmetic.js';
import type { WindowLimits } from '../budget/planner.js';
import { readRequest } from '../model/index.js';
import type { ProviderRequest, StepContext } from '../step.js';
import { promptRoomFor, routeMarginPct } from './fit-window.js';
import { floorRequest } from './plan.js';

/** What {@link fittedPressure} needs: W and R, the count the cap makes, and the fit's settings. */
export interface FittedPressureInputs {
  readonly limits: WindowLimits | undefined;
  /** Pressure P + R − 1 of the request as it is. */
  readonly pressure: number;
  readonly count: (request: ProviderRequest) => Promise<number | undefined>;
  readonly lowWaterPct: number;
  /** The request's context: its route and the tokens the host adds after the pipeline. */
  readonly context: StepContext;
  /** The fit's foreign-tokenizer margin (percent; 0 with the provider's own counter). */
  readonly foreignMarginPct: number;
}

/**
 * The preflight pressure a host should see for `request` when the window fit runs after it.
 *
 * @example
 * const p = await fittedPressure(request, { limits, pressure, count, lowWaterPct: 70, context, foreignMarginPct: 25 });
 */
export async function fittedPressure(request: ProviderRequest, i: FittedPressureInputs): Promise<number> {
  const { limits, pressure } = i;
  if (limits === undefined || pressure < limits.window) return pressure;
  const floor = floorRequest(request, readRequest(request));
  const least = floor === undefined ? undefined : await i.count(floor);
  const room = promptRoomFor(limits.window, limits.reserve, i.context, i.foreignMarginPct);
  if (least === undefined || least > room) return pressure;
  const fitted = Math.max(least, Math.floor((room * i.lowWaterPct) / 100));
  // room × (1 + margin) + added ≤ W − R, so this stays below W.
  const pct = routeMarginPct(i.context, i.foreignMarginPct);
  const added = Math.max(0, i.context.addedPromptTokens ?? 0);
  return preflightPressure(Math.ceil((fitted * (100 + pct)) / 100) + added, limits.reserve);
}
