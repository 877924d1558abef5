/**
 * What a LangChain model call would send, run through the host path ({@link Terminator.prepare}):
 * BaseMessages → Chat Completions request → prepared → BaseMessages again, plus the output cap the
 * pipeline set. Ephemeral by construction: the caller's messages and the graph state are never
 * touched. The adapter reduces tool results as they enter the state and registers the recovery
 * tool itself, so the host path only runs the request stream.
 */
import { randomUUID } from 'node:crypto';
import type { BaseMessage, SystemMessage } from '@langchain/core/messages';
import { convertToOpenAITool } from '@langchain/core/utils/function_calling';
import type { Terminator } from '../../src/runtime/types.js';
import type { Decision, Route } from '../../src/step.js';
import { readOutputCap } from '../shared/functions.js';
import { fromChatRequest, toChatRequest } from './messages.js';
import { modelMaxTokens } from './run-context.js';

/** What {@link compileMessages} returns: the messages to send, a replacement system message and the cap. */
export interface CompiledMessages {
  /** Messages for the model (the input array itself when nothing changed). */
  readonly messages: BaseMessage[];
  /** A replacement system message, when the pipeline changed it. */
  readonly systemMessage?: SystemMessage;
  /** The output cap the compiled request carries. */
  readonly cap: number | undefined;
  /** Content-free decisions of every stage that ran on this call. */
  readonly decisions: readonly Decision[];
}

/** One LangChain model call as {@link compileMessages} reads it. */
export interface CompileMessagesInput {
  readonly messages: BaseMessage[];
  readonly systemMessage?: BaseMessage | undefined;
  readonly tools?: readonly unknown[] | undefined;
  readonly model: unknown;
  readonly sessionId: string;
  readonly route: Route;
  readonly signal?: AbortSignal | undefined;
}

/** Tool schemas are measured as the provider would see them; a tool that cannot be converted is left out. */
function chatTools(tools: readonly unknown[] | undefined): Record<string, unknown>[] {
  return (tools ?? []).flatMap((t) => {
    try {
      return [convertToOpenAITool(t as Record<string, unknown>) as unknown as Record<string, unknown>];
    } catch {
      return []; // server tools and exotic runnables are not measured
    }
  });
}

/**
 * Compile one model call. Fail-open: any translation error yields the input messages unchanged.
 *
 * @example
 * const { messages, cap } = await compileMessages(terminator, { messages: state.messages, model: llm, sessionId: 'thread-1', route: { model: 'gpt-5' } });
 */
export async function compileMessages(terminator: Terminator, input: CompileMessagesInput): Promise<CompiledMessages> {
  try {
    const conversion = toChatRequest({
      messages: input.messages,
      systemMessage: input.systemMessage,
      model: input.route.model,
      tools: chatTools(input.tools),
      maxTokens: modelMaxTokens(input.model),
    });
    const prepared = await terminator.prepare({
      request: conversion.request,
      context: { sessionId: input.sessionId, requestId: randomUUID(), route: input.route, format: 'chat' },
      signal: input.signal,
      exchanges: false,
      toolOutputs: false,
    });
    const cap = readOutputCap(prepared.request);
    if (!prepared.changed) return { messages: input.messages, cap, decisions: prepared.decisions };
    return { ...fromChatRequest(prepared.request, conversion), cap, decisions: prepared.decisions };
  } catch {
    return { messages: input.messages, cap: undefined, decisions: [] };
  }
}
