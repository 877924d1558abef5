/** The paired answer-quality harness (`token-terminator eval`): synthetic tasks, grading, the precommitted rule, the runner. */
export { runEval, planEval, armOrder, EvalAbortedError } from './run.js';
export type { EvalOptions, EvalResults } from './run.js';
export { makeTasks, makeTask, TASK_FAMILIES, type EvalTask } from './tasks.js';
export { grade, extractAnswer } from './grade.js';
export { analyse, CHECKPOINT_PAIRS, FINAL_PAIRS, DEFAULT_MARGIN, type Analysis } from './protocol.js';
export { mcnemarHarmP, tangoZ, exactNonInferiorityP } from './stats.js';
export { chatCompletion, DriftGuard, EvalDriftError, EvalProviderError } from './client.js';
export { estimateEval } from './estimate.js';
