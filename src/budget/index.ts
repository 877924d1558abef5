/** Output budget (incontext): cap arithmetic, request cap fields, counting backends, provider errors. */
export {
  planOutputCap,
  preflightPressure,
  effectiveReserve,
  checkBudgetSettings,
  type CapInputs,
  type CapPlan,
  type BudgetSettingsCheck,
} from './arithmetic.js';
export {
  CAP_FIELDS,
  readCallerCap,
  detectRequestFormat,
  capFieldFor,
  withOutputCap,
  extraBody,
  type CapField,
  type CapDialect,
} from './request-caps.js';
export {
  BudgetCounterError,
  budgetCounterFrom,
  isBudgetCounter,
  promptParts,
  roughRequestTokens,
  type BudgetCounter,
  type CountContext,
  type CounterFailure,
  type TokenCounterAdapterOptions,
} from './counter.js';
export { createVllmCounter, buildTokenizePayload, type VllmCounterOptions } from './vllm.js';
export {
  createCounterRegistry,
  defaultCounterRegistry,
  registerCounter,
  type BackendSettings,
  type BudgetCounterFactory,
  type CounterRegistry,
} from './registry.js';
export { parseOutputCapError, type OutputCapInfo } from './provider-errors.js';
export {
  BUILT_IN_MODEL_LIMITS,
  canonicalModelId,
  checkModelLimits,
  createModelLimits,
  lookupModelLimits,
  type ModelLimits,
  type ModelLimitsLookup,
  type ModelLimitsTable,
} from './model-limits.js';
export {
  createOutputBudget,
  contextBudget,
  isPrimaryRoute,
  type ContextBudget,
  type OutputBudgetOptions,
  type BudgetMeasurement,
  type BudgetRun,
  type OutputBudget,
} from './planner.js';
