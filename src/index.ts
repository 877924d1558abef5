/**
 * token-terminator: what a user composes — `createTerminator`, the operators (also on
 * `token-terminator/operators`), the vault, counters, receipts, the recovery tool, the output budget,
 * configuration and the errors. Adapters, the testing kit and the report have their own subpaths;
 * replay, eval and the CLI are tooling behind the `token-terminator` command.
 */
export type * from './step.js';
export type * from './operator-kit.js';
export type * from './receipts/index.js';
export type * from './runtime/types.js';
export type * from './config/index.js';
export type * from './measure/index.js';
export type { CountMemo, CountMemoOptions } from './ledger/count-memo.js';
export type * from './vault/index.js';
export type * from './recovery/index.js';
export type * from './model/index.js';
export type * from './budget/index.js';
export type * from './telemetry/index.js';
export type * from './errors.js';
export type { TerminatorOptions, ModeGates } from './runtime/index.js';
export type { OptionalPackageName } from './optional-package.js';

// Steps and writing an operator of your own (docs/custom-operators.md).
export { createStep, advance, note, failOpen, errorLabel, sessionStateKey, parseSessionStateKey } from './step.js';
export { stepOperator } from './operator-kit.js';

// The pipelines and their operators.
export { createTerminator, modeGates } from './runtime/index.js';
export {
  rewriteTerminalCommand,
  deltaRepeatedOutput,
  compressToolResult,
  collapseDuplicates,
  routeSkills,
  compileRequest,
  capOutputBudget,
  createPressure,
} from '../operators/index.js';

// Configuration.
export {
  loadConfig,
  applyOverrides,
  CONFIG_DEFAULTS,
  CONFIG_VARIABLES,
  MODES,
  CANONICAL_TOOLS,
  PRICING_PROFILES,
  DEFAULT_OBSERVATION_PATTERN,
} from './config/index.js';

// Token counting and sizes.
export {
  createTiktokenCounter,
  createTokenizerJsonCounter,
  createRoughCounter,
  counterForModel,
  encodingForModel,
  canonicalJson,
  serializedChars,
  codePoints,
  TIKTOKEN_ENCODINGS,
} from './measure/index.js';

// The vault, receipts and recovery.
export { createVault } from './vault/index.js';
export { createReceipt, renderReceipt, parseReceipt, isReceipt, referencedArtifacts } from './receipts/index.js';
export {
  createRecoveryTool,
  isRecoveryResult,
  recoveryError,
  recoveryArgsSchema,
  recoveryJsonSchema,
  RECOVERY_TOOL_NAME,
  RECOVERY_DESCRIPTION,
  RECOVERY_ERRORS,
} from './recovery/index.js';

// Provider requests.
export { readRequest, writeSlots, detectFormat } from './model/index.js';

// The output budget.
export {
  createOutputBudget,
  planOutputCap,
  preflightPressure,
  createVllmCounter,
  registerCounter,
  createModelLimits,
  lookupModelLimits,
  BUILT_IN_MODEL_LIMITS,
  parseOutputCapError,
} from './budget/index.js';

// Savings accounting.
export { openLedger } from './telemetry/index.js';

// Errors.
export {
  TokenTerminatorError,
  ConfigError,
  ArtifactNotFoundError,
  VaultCapacityError,
  VaultVerifyError,
  VaultSchemaError,
  CounterError,
  RtkFaultError,
  RTK_FAULT_CODES,
} from './errors.js';
export { VaultArgumentError, VaultContentError, VaultOpenError, WorkingStateError } from './vault/index.js';
export { BudgetCounterError } from './budget/index.js';
export { LedgerError } from './telemetry/index.js';
export { MissingPackageError, OPTIONAL_PACKAGES } from './optional-package.js';
