/**
 * The incontext output-budget arithmetic (docs/model-limits.md), as pure functions.
 *
 * W  budgeting boundary (compression threshold, else context window, or the explicit override)
 * P  prompt tokens (exact count, else the rough estimate + F)
 * R  output reserve (INCONTEXT_MIN_OUTPUT_TOKENS; a smaller explicit route cap replaces it)
 * B  the caller's own cap on this request (smallest positive of the three cap fields), optional
 * F  fallback margin, added to P only when exact counting failed
 */
import { ConfigError } from '../errors.js';

/** The numbers an output cap is computed from: window W, prompt tokens P, required output R and the caller's own cap B. */
export interface CapInputs {
  readonly window: number;
  readonly prompt: number;
  readonly reserve: number;
  readonly callerCap?: number | undefined;
}

/** The output cap computed from {@link CapInputs}. */
export interface CapPlan {
  /** min(R, B), or R without B: the least output worth sending the request with. */
  readonly required: number;
  /** W − P. */
  readonly remaining: number;
  /** The cap to insert, or undefined when remaining < required (the request is left unchanged). */
  readonly cap: number | undefined;
}

/**
 * required = min(R, B) or R; remaining = W − P; cap = min(remaining, B) or remaining, inserted only
 * when remaining ≥ required. So an inserted cap is never above remaining, never below required,
 * and never below R unless the caller asked for less.
 *
 * @example
 * const plan = planOutputCap({ window: 128_000, prompt: 100_000, reserve: 4096 }); // cap 28_000
 */
export function planOutputCap({ window, prompt, reserve, callerCap }: CapInputs): CapPlan {
  const b = callerCap !== undefined && callerCap > 0 ? callerCap : undefined;
  const required = b === undefined ? reserve : Math.min(reserve, b);
  const remaining = window - prompt;
  if (remaining < required) return { required, remaining, cap: undefined };
  return { required, remaining, cap: b === undefined ? remaining : Math.min(remaining, b) };
}

/**
 * Preflight pressure P + R − 1: reaches W exactly when W − P < R, so a host that compresses at W
 * compresses exactly when the prompt leaves less than the reserve.
 *
 * @example
 * import { preflightPressure } from 'token-terminator';
 * preflightPressure(100_000, 4096) >= 104_096; // false: the prompt leaves the reserve free
 */
export function preflightPressure(prompt: number, reserve: number): number {
  return prompt + reserve - 1;
}

/**
 * R: the configured reserve, replaced by a smaller positive explicit route cap.
 *
 * @example
 * effectiveReserve(4096, 1024); // 1024: a smaller route cap wins
 * effectiveReserve(4096, undefined); // 4096
 */
export function effectiveReserve(minOutputTokens: number, routeCap: number | undefined): number {
  return routeCap !== undefined && routeCap > 0 && routeCap < minOutputTokens ? routeCap : minOutputTokens;
}

/** The settings checked at startup: loud configuration errors, never content errors. */
export interface BudgetSettingsCheck {
  readonly window?: number | undefined;
  readonly contextWindow?: number | undefined;
  readonly reserve: number;
  readonly fallbackMargin: number;
}

/**
 * Startup checks: positive integers, W ≤ context window, and F + R < W (otherwise not even the
 * smallest fallback-counted prompt would leave room). `who` names the API in the message.
 *
 * @example
 * checkBudgetSettings('myBudget', { reserve: 4096, fallbackMargin: 512, window: 128_000 });
 * // throws a ConfigError naming 'myBudget' when reserve is 0
 */
export function checkBudgetSettings(who: string, s: BudgetSettingsCheck): void {
  const int = (name: string, v: number | undefined, min: number): void => {
    if (v !== undefined && (!Number.isSafeInteger(v) || v < min))
      throw new ConfigError(`${who}: ${name} must be an integer ≥ ${min} (got ${String(v)})`);
  };
  int('INCONTEXT_MIN_OUTPUT_TOKENS (minOutputTokens)', s.reserve, 1);
  int('INCONTEXT_FALLBACK_MARGIN_TOKENS (fallbackMarginTokens)', s.fallbackMargin, 0);
  int('INCONTEXT_COMPRESSION_WINDOW_TOKENS (the budgeting window W)', s.window, 1);
  int('route.contextWindow', s.contextWindow, 1);
  if (s.window !== undefined && s.contextWindow !== undefined && s.window > s.contextWindow) {
    throw new ConfigError(
      `${who}: INCONTEXT_COMPRESSION_WINDOW_TOKENS (${s.window}) exceeds the context window (${s.contextWindow})`,
    );
  }
  if (s.window !== undefined && s.fallbackMargin + s.reserve >= s.window) {
    throw new ConfigError(
      `${who}: INCONTEXT_FALLBACK_MARGIN_TOKENS + INCONTEXT_MIN_OUTPUT_TOKENS (${s.fallbackMargin} + ${s.reserve}) must be below the budgeting window W (${s.window})`,
    );
  }
}
