/** The paired answer-quality harness (`token-terminator eval`): synthetic tasks, grading, the precommitted rule, the runner. */
export { runEval, planEval, armOrder, openingMessages, evalTools, EvalAbortedError } from './run.js';
export type {
  EvalOptions,
  EvalProtocol,
  EvalResults,
  PairResult,
  ArmResult,
  ArmTotals,
  Arm,
  ArmOutcome,
} from './run.js';
export { makeTasks, makeTask, TASK_FAMILIES, type EvalTask, type TaskFamily } from './tasks.js';
export { grade, extractAnswer, SYSTEM_PROMPT } from './grade.js';
export {
  analyse,
  decisionRule,
  CHECKPOINT_PAIRS,
  FINAL_PAIRS,
  DEFAULT_MARGIN,
  ALPHA,
  ALPHA_HARM,
  type Analysis,
  type Verdict,
} from './protocol.js';
export { mcnemarHarmP, tangoZ, exactNonInferiorityP } from './stats.js';
export {
  chatCompletion,
  DriftGuard,
  EvalDriftError,
  EvalProviderError,
  type Identity,
  type ChatMessage,
} from './client.js';
export { estimateEval, type EvalEstimate } from './estimate.js';
