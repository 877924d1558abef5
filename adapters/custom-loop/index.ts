/**
 * Custom-loop adapter: a framework-free function API plus wrappers for the official `openai`
 * client and an Anthropic-style `messages.create`.
 *
 * @example
 * import { wrapOpenAI, reduceToolResult, handleRecoveryCall } from 'token-terminator/adapters/custom-loop';
 */
export {
  reduceToolResult,
  prepareRequest,
  readOutputCap,
  outputCapField,
  withOutputCap,
  OUTPUT_CAP_FIELDS,
} from '../shared/functions.js';
export type { ReducedToolResult, PreparedRequest, OutputCapField } from '../shared/functions.js';
export { handleRecoveryCall, recoveryToolDefinition, recoveryArgs, RECOVERY_TOOL_NAME } from '../shared/recovery.js';
export type { WireFormat } from '../shared/recovery.js';
export { wrapOpenAI } from './openai.js';
export type { OpenAILike } from './openai.js';
export { wrapAnthropic } from './anthropic.js';
export type { AnthropicLike } from './anthropic.js';
export type { ClientWrapOptions, RequestOptionsLike } from './wrap-create.js';
