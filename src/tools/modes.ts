/**
 * Mode gates for the tool-stream operators. Operators accept either a
 * `mode` or the `ModeFlags` computed by src/config (flags win, so `enabled` and
 * `temporalDelta` are honoured when the runtime passes them).
 */
import { oneOfOption } from '../options.js';
import { MODES, modeFlags, type ModeFlags } from '../config/index.js';
import type { Mode } from '../config/types.js';

/** Resolve `{ mode, flags }` options at build time; default balanced (a bare mode: enabled, temporal delta on). */
export function resolveFlags(
  operator: string,
  options: { readonly mode?: Mode; readonly flags?: ModeFlags },
): ModeFlags {
  if (options.flags !== undefined) return options.flags;
  return modeFlags({
    enabled: true,
    mode: oneOfOption(operator, 'mode', options.mode, 'balanced', MODES),
    temporalDelta: true,
  });
}
