/**
 * LangGraph.js / LangChain v1 adapter: `createAgent` middleware, the legacy `createReactAgent`
 * hooks, and the recovery tool as a LangChain tool.
 *
 * @example
 * import { tokenTerminatorMiddleware } from 'token-terminator/adapters/langgraph';
 * const agent = createAgent({ model, tools, middleware: [tokenTerminatorMiddleware(terminator)] });
 */
export { tokenTerminatorMiddleware } from './middleware.js';
export type { TokenTerminatorMiddlewareOptions } from './middleware.js';
export { langchainRecoveryTool } from './recovery-tool.js';
export { cappedModel, cloneWithMaxTokens } from './capped-model.js';
export type { CapModelFactory, CappedModels } from './capped-model.js';
export { compileMessages } from './compile-messages.js';
export type { CompiledMessages, CompileMessagesInput } from './compile-messages.js';
export { reduceToolMessage, textContent } from './tool-message.js';
export type { TerminatorArtifact } from './tool-message.js';
export { toChatRequest, fromChatRequest } from './messages.js';
export type { ChatConversion } from './messages.js';
export type { LangGraphRunOptions } from './run-context.js';
export { createReactAgentHooks, TerminatorToolNode } from './legacy.js';
export type { ReactAgentHookOptions } from './legacy.js';
