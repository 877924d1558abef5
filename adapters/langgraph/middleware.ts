/**
 * LangChain v1 `createAgent` middleware: tool results go through the tool stream as they enter the
 * state (`wrapToolCall`), and every model call sees a compiled, capped view of the messages
 * (`wrapModelCall`, ephemeral: the state keeps the originals).
 */
import { ToolMessage } from '@langchain/core/messages';
import { createMiddleware, type AgentMiddleware } from 'langchain';
import type { Decision } from '../../src/step.js';
import type { Terminator } from '../../src/runtime/types.js';
import { cappedModel, type CapAndArtifactOptions, type CappedModels } from './capped-model.js';
import { compileMessages } from './compile-messages.js';
import { langchainRecoveryTool } from './recovery-tool.js';
import { modelMaxTokens, routeForModel, sessionResolver, type LangGraphRunOptions } from './run-context.js';
import { reduceToolMessage } from './tool-message.js';

/** Options of {@link tokenTerminatorMiddleware}. */
export interface TokenTerminatorMiddlewareOptions extends LangGraphRunOptions, CapAndArtifactOptions {
  /** Register the `token_terminator` recovery tool with the agent. @defaultValue true */
  readonly recoveryTool?: boolean;
  /** Send tool results through the tool stream. @defaultValue true */
  readonly reduceToolResults?: boolean;
  /** Compile what each model call sees. @defaultValue true */
  readonly compileRequests?: boolean;
  /** Apply the pipeline's output cap by swapping in a capped model instance. @defaultValue true */
  readonly capOutput?: boolean;
  /** Content-free decisions of every call (metrics). @defaultValue none */
  readonly onDecisions?: (decisions: readonly Decision[]) => void;
}

/**
 * `createAgent` middleware that reduces tool results, compiles what each model call sees, applies the output cap and registers the recovery tool.
 *
 * @example
 * const agent = createAgent({ model, tools, middleware: [tokenTerminatorMiddleware(terminator)], checkpointer });
 * await agent.invoke({ messages }, { configurable: { thread_id: 'session-1' }, signal });
 */
export function tokenTerminatorMiddleware(
  terminator: Terminator,
  options: TokenTerminatorMiddlewareOptions = {},
): AgentMiddleware {
  const resolveSession = sessionResolver(options);
  const keepOriginal = options.keepOriginalInArtifact ?? true;
  // In pass-through mode nothing is stored, so there is nothing to recover: no tool, no cost.
  const tools =
    options.recoveryTool === false || terminator.passThrough === true
      ? []
      : [langchainRecoveryTool(terminator, options, resolveSession)];
  // Capped instances of the agent's models, reused by this middleware only.
  const models: CappedModels = new WeakMap();
  return createMiddleware({
    name: 'TokenTerminator',
    tools,
    wrapToolCall: async (request, handler) => {
      const result = await handler(request);
      if (options.reduceToolResults === false || !ToolMessage.isInstance(result)) return result;
      const runtime = request.runtime as { configurable?: unknown; signal?: AbortSignal };
      const sessionId = resolveSession(runtime.configurable);
      return reduceToolMessage(terminator, result, request.toolCall.args, { sessionId }, runtime.signal, keepOriginal);
    },
    wrapModelCall: async (request, handler) => {
      if (options.compileRequests === false && options.capOutput === false) return handler(request);
      const runtime = request.runtime as { configurable?: unknown; signal?: AbortSignal };
      const compiled = await compileMessages(terminator, {
        messages: request.messages,
        systemMessage: request.systemMessage,
        tools: request.tools,
        model: request.model,
        sessionId: resolveSession(runtime.configurable),
        route: routeForModel(request.model, options),
        signal: runtime.signal,
      });
      options.onDecisions?.(compiled.decisions);
      let next = request;
      if (options.compileRequests !== false && compiled.messages !== request.messages) {
        next = {
          ...next,
          messages: compiled.messages,
          ...(compiled.systemMessage === undefined ? {} : { systemMessage: compiled.systemMessage }),
        };
      }
      if (options.capOutput !== false && compiled.cap !== undefined && compiled.cap !== modelMaxTokens(request.model))
        next = {
          ...next,
          model: cappedModel(request.model as object, compiled.cap, options.capModel, models) as typeof request.model,
        };
      return handler(next);
    },
  }) as unknown as AgentMiddleware;
}
