/**
 * token-terminator: the package's main export. Re-exports the public API of every core module.
 * Additive only: never remove or rename an export here. Operators have their own subpath
 * (`token-terminator/operators`), test helpers theirs (`token-terminator/testing`).
 */
export * from './step.js';
export * from './operator-kit.js';
export * from './errors.js';
export { MissingPackageError, OPTIONAL_PACKAGES, type OptionalPackageName } from './optional-package.js';
export * from './receipts/index.js';
export type * from './runtime-types.js';
export * from './config/index.js';
export * from './measure/index.js';
// Both config and measure name the supported encodings; the measure list is the one counters use.
export { TIKTOKEN_ENCODINGS } from './measure/index.js';
export * from './vault/index.js';
export * from './recovery/index.js';
export * from './model/index.js';
export * from './budget/index.js';
export * from './telemetry/index.js';
export * from './replay/index.js';
export { createTerminator, modeGates, preflightPressure, Lane } from './runtime.js';
export type { TerminatorOptions, ModeGates } from './runtime.js';
export {
  createItemMeasures,
  type ItemMeasures,
  type ItemMeasuresOptions,
  type ItemEntry,
  type Segment,
} from './compile/item-measures.js';
