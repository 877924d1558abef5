/**
 * Preflight pressure with the window fit in the pipeline (docs/window.md): a host that compacts
 * when pressure reaches W must compact only when the fit cannot make the request fit. Over W, the
 * least the fit can leave (every reducible slot as its receipt) decides: when even that and R do
 * not fit, the pressure stays at or above W (the host compacts); otherwise it is what the fit
 * brings the prompt to, the low-water mark, plus R − 1.
 */
import { preflightPressure } from '../budget/arithmetic.js';
import type { WindowLimits } from '../budget/planner.js';
import { createDigests } from '../ledger/digests.js';
import { readRequest } from '../model/index.js';
import type { ProviderRequest } from '../step.js';
import { floorRequest } from './plan.js';

/** What {@link fittedPressure} needs: W and R, the count the cap makes, and the fit's settings. */
export interface FittedPressureInputs {
  readonly limits: WindowLimits | undefined;
  /** Pressure P + R − 1 of the request as it is. */
  readonly pressure: number;
  readonly count: (request: ProviderRequest) => Promise<number | undefined>;
  readonly lowWaterPct: number;
  readonly minChars: number;
}

/**
 * The preflight pressure a host should see for `request` when the window fit runs after it.
 *
 * @example
 * const p = await fittedPressure(request, { limits, pressure, count, lowWaterPct: 70, minChars: 600 });
 */
export async function fittedPressure(request: ProviderRequest, i: FittedPressureInputs): Promise<number> {
  const { limits, pressure } = i;
  if (limits === undefined || pressure < limits.window) return pressure;
  const floor = floorRequest(
    request,
    readRequest(request),
    { digests: createDigests(), diagnosticChars: 0, viewChars: 200 },
    i.minChars,
  );
  const least = floor === undefined ? undefined : await i.count(floor);
  if (least === undefined || preflightPressure(least, limits.reserve) >= limits.window) return pressure;
  const target = Math.floor(((limits.window - limits.reserve) * i.lowWaterPct) / 100);
  return preflightPressure(Math.max(least, target), limits.reserve);
}
