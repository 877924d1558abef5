/**
 * OpenAI Agents JS adapter: `callModelInputFilter` for compile, a Model wrapper for the output cap,
 * a tool wrapper for the tool stream and the recovery tool as a function tool.
 *
 * @example
 * import { createAgentsAdapter } from 'token-terminator/adapters/openai-agents';
 */
export { createAgentsAdapter } from './adapter.js';
export type { AgentsAdapter, AgentsAdapterOptions } from './adapter.js';
export { createInputFilter } from './input-filter.js';
export type { InputFilterOptions } from './input-filter.js';
export { wrapModel, wrapModelProvider } from './model.js';
export { wrapTool } from './tool-wrapper.js';
export { agentsRecoveryTool } from './recovery-tool.js';
export { CapLedger } from './cap-ledger.js';
export { toResponsesInput, fromResponsesInput, outputText } from './items.js';
export type { ResponsesConversion } from './items.js';
export { agentsSessionResolver } from './session-id.js';
export type { AgentsSessionOptions } from './session-id.js';
