/**
 * `token-terminator/operators`: one RxJS operator per reduction path.
 *
 * Tool stream: rewriteTerminalCommand → (host runs the tool) → reduceToolResult (its presets:
 * deltaRepeatedOutput, compressToolResult).
 * Request stream: collapseDuplicates → routeSkills → compileRequest → capOutputBudget.
 */
export { rewriteTerminalCommand, type RewriteTerminalCommandOptions } from './rewrite-terminal-command.js';
export { reduceToolResult, type ReduceToolResultOptions } from './reduce-tool-result.js';
export { deltaRepeatedOutput, type DeltaRepeatedOutputOptions } from './delta-repeated-output.js';
export { compressToolResult, type CompressToolResultOptions } from './compress-tool-result.js';
export { collapseDuplicates, type CollapseDuplicatesOptions } from './collapse-duplicates.js';
export { routeSkills, type RouteSkillsOptions } from './route-skills.js';
export { compileRequest, type CompileRequestOptions } from './compile-request.js';
export { capOutputBudget, createPressure, type CapOutputBudgetOptions, type Pressure } from './cap-output-budget.js';
