/**
 * token-terminator: the package's main export. Re-exports the public API of every module.
 * Additive only: never remove or rename an export here.
 */
export * from './step.js';
export * from './operator-kit.js';
export * from './errors.js';
export * from './receipts/index.js';
export type * from './runtime-types.js';
export type * from './vault/types.js';
export type * from './measure/types.js';
export type * from './config/types.js';
export { createTerminator, modeGates, preflightPressure, Lane } from './runtime.js';
export type { TerminatorOptions, ModeGates } from './runtime.js';
