/**
 * Mode gates for the tool-stream operators. Operators accept either a
 * `mode` or the `ModeFlags` computed by src/config (flags win, so `enabled` and
 * `temporalDelta` are honoured when the runtime passes them).
 */
import { oneOfOption } from '../options.js';
import { MODES, modeFlags, type ModeFlags } from '../config/index.js';
import type { Mode } from '../config/types.js';

export { MODES };

/** Flags for a bare mode (enabled, temporal delta on): the config's modes table, read once there. */
export function flagsForMode(mode: Mode): ModeFlags {
  return modeFlags({ enabled: true, mode, temporalDelta: true });
}

/** Resolve `{ mode, flags }` options at build time; default balanced. */
export function resolveFlags(
  operator: string,
  options: { readonly mode?: Mode; readonly flags?: ModeFlags },
): ModeFlags {
  if (options.flags !== undefined) return options.flags;
  return flagsForMode(oneOfOption(operator, 'mode', options.mode, 'balanced', MODES));
}
