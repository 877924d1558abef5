/**
 * `token-terminator/operators`: one RxJS operator per reduction path.
 *
 * Tool stream: rewriteTerminalCommand → (host runs the tool) → deltaRepeatedOutput → compressToolResult.
 * Request stream: collapseDuplicates → routeSkills → compileRequest → capOutputBudget.
 */
export { rewriteTerminalCommand, type RewriteTerminalCommandOptions } from './rtk-rewrite.js';
export { deltaRepeatedOutput, type DeltaRepeatedOutputOptions } from './temporal-delta.js';
export { compressToolResult, type CompressToolResultOptions } from './compress-tool-result.js';
export { collapseDuplicates, type CollapseDuplicatesOptions } from './dedupe.js';
export { routeSkills, type RouteSkillsOptions } from './skill-gate.js';
export { compileRequest, type CompileRequestOptions } from './compile.js';
export { capOutputBudget, createPressure, type CapOutputBudgetOptions, type Pressure } from './budget-cap.js';
