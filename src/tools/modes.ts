/**
 * Mode gates for the tool-stream operators, from the seed's table. Operators accept either a
 * `mode` or the `ModeFlags` computed by src/config (flags win, so `enabled` and
 * `temporalDelta` are honoured when the runtime passes them).
 */
import { oneOfOption } from '../options.js';
import type { ModeFlags } from '../config/index.js';
import type { Mode } from '../config/types.js';

export const MODES: readonly Mode[] = ['balanced', 'aggressive', 'native', 'terminal', 'suggest', 'off'];

/** Flags for a bare mode (enabled, temporal delta on). */
export function flagsForMode(mode: Mode): ModeFlags {
  const compiler = mode === 'balanced' || mode === 'aggressive';
  const native = compiler || mode === 'native';
  return Object.freeze({
    terminal: compiler || mode === 'terminal',
    native,
    nativeReadFile: mode === 'aggressive',
    compiler,
    temporal: compiler,
    suggest: mode === 'suggest',
    recoveryTool: native || compiler,
  });
}

/** Resolve `{ mode, flags }` options at build time; default balanced. */
export function resolveFlags(operator: string, options: { readonly mode?: Mode; readonly flags?: ModeFlags }): ModeFlags {
  if (options.flags !== undefined) return options.flags;
  return flagsForMode(oneOfOption(operator, 'mode', options.mode, 'balanced', MODES));
}
