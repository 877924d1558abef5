/**
 * LangChain BaseMessages ↔ a Chat Completions request, for the request pipeline.
 *
 * Forward: every BaseMessage becomes one Chat Completions message, and the converter remembers
 * which chat object came from which BaseMessage. Back: a chat message the pipeline left untouched
 * (same object) maps to its original BaseMessage as is; only messages the pipeline changed or
 * inserted are rebuilt, taking ids, names, status and artifacts from the message they replace.
 */
import { AIMessage, HumanMessage, SystemMessage, ToolMessage, type BaseMessage } from '@langchain/core/messages';
import { parseArgs } from '../../src/model/read.js';
import { definedFields } from '../../src/options.js';
import type { ProviderRequest } from '../../src/step.js';

type ChatMessage = Record<string, unknown>;

/** A request built from BaseMessages plus what the way back needs. */
export interface ChatConversion {
  readonly request: ProviderRequest;
  /** Chat message object → the BaseMessage it was built from. */
  readonly sources: ReadonlyMap<object, BaseMessage>;
  /** The chat message built from the system message, when there was one. */
  readonly system: ChatMessage | undefined;
}

/** The parts of a LangChain model call {@link toChatRequest} turns into a Chat Completions request. */
export interface ChatRequestInput {
  readonly messages: readonly BaseMessage[];
  readonly systemMessage?: BaseMessage | undefined;
  readonly model?: string | undefined;
  /** Tool definitions in Chat Completions shape (measured, never rewritten back). */
  readonly tools?: readonly Record<string, unknown>[] | undefined;
  readonly maxTokens?: number | undefined;
}

/** Text parts stay text parts; any other block is carried as the plain object it already is. */
function chatContent(content: unknown): unknown {
  if (typeof content === 'string' || !Array.isArray(content)) return content ?? '';
  return content.map((block: unknown) => {
    if (typeof block === 'string') return { type: 'text', text: block };
    const b = block as { type?: unknown; text?: unknown };
    return b.type === 'text' && typeof b.text === 'string' ? { type: 'text', text: b.text } : block;
  });
}

function toChatMessage(message: BaseMessage): ChatMessage {
  const content = chatContent(message.content);
  switch (message.getType()) {
    case 'system':
      return { role: 'system', content };
    case 'human':
      return { role: 'user', content };
    case 'ai': {
      const calls = (message as AIMessage).tool_calls ?? [];
      if (calls.length === 0) return { role: 'assistant', content };
      return {
        role: 'assistant',
        content: content === '' ? null : content,
        tool_calls: calls.map((c) => ({
          id: c.id ?? '',
          type: 'function',
          function: { name: c.name, arguments: JSON.stringify(c.args ?? {}) },
        })),
      };
    }
    case 'tool':
      return { role: 'tool', tool_call_id: (message as ToolMessage).tool_call_id, content };
    default: {
      const role = (message as { role?: unknown }).role;
      return { role: typeof role === 'string' ? role : 'user', content };
    }
  }
}

/**
 * Build a Chat Completions request from what a LangChain model call would send.
 *
 * @example
 * const conversion = toChatRequest({ messages, model: 'gpt-5' });
 */
export function toChatRequest(input: ChatRequestInput): ChatConversion {
  const sources = new Map<object, BaseMessage>();
  const withSystem = input.systemMessage?.text ? [input.systemMessage, ...input.messages] : input.messages;
  const messages = withSystem.map((m) => {
    const chat = toChatMessage(m);
    sources.set(chat, m);
    return chat;
  });
  const system = withSystem === input.messages ? undefined : messages[0];
  const request: Record<string, unknown> = { messages };
  if (input.model !== undefined) request['model'] = input.model;
  if (input.tools !== undefined && input.tools.length > 0) request['tools'] = input.tools;
  if (input.maxTokens !== undefined) request['max_tokens'] = input.maxTokens;
  return { request, sources, system };
}

/**
 * Back to LangChain: the messages the model should see, and a replacement system message if it changed.
 *
 * @example
 * const { messages: shown } = fromChatRequest(compiled, toChatRequest({ messages }));
 */
export function fromChatRequest(
  compiled: ProviderRequest,
  conversion: ChatConversion,
): { messages: BaseMessage[]; systemMessage?: SystemMessage } {
  const list = Array.isArray(compiled['messages']) ? (compiled['messages'] as ChatMessage[]) : [];
  const byToolCall = new Map<string, BaseMessage>();
  const byAssistantCall = new Map<string, BaseMessage>();
  for (const [chat, source] of conversion.sources) {
    const c = chat as ChatMessage;
    if (c['role'] === 'tool') byToolCall.set(String(c['tool_call_id']), source);
    const calls = c['tool_calls'] as { id: string }[] | undefined;
    if (calls?.[0] !== undefined) byAssistantCall.set(calls[0].id, source);
  }
  const messages: BaseMessage[] = [];
  let systemMessage: SystemMessage | undefined;
  let systemSeen = false;
  list.forEach((chat, index) => {
    const source = conversion.sources.get(chat);
    if (source !== undefined) {
      if (chat === conversion.system) systemSeen = true;
      else messages.push(source);
      return;
    }
    const role = chat['role'];
    if (index === 0 && role === 'system' && conversion.system !== undefined && !systemSeen) {
      systemSeen = true;
      systemMessage = new SystemMessage({ content: fromChatContent(chat['content']) as string });
      return;
    }
    const calls = chat['tool_calls'] as { id: string }[] | undefined;
    const template =
      role === 'tool'
        ? byToolCall.get(String(chat['tool_call_id']))
        : calls?.[0] !== undefined
          ? byAssistantCall.get(calls[0].id)
          : undefined;
    messages.push(rebuild(chat, template));
  });
  return systemMessage === undefined ? { messages } : { messages, systemMessage };
}

function fromChatContent(content: unknown): string | Record<string, unknown>[] {
  if (content === null || content === undefined) return '';
  if (typeof content === 'string') return content;
  return Array.isArray(content) ? (content as Record<string, unknown>[]) : String(content);
}

function rebuild(chat: ChatMessage, template: BaseMessage | undefined): BaseMessage {
  const content = fromChatContent(chat['content']) as string;
  const id = template?.id === undefined ? {} : { id: template.id };
  switch (chat['role']) {
    case 'tool': {
      const t = template as ToolMessage | undefined;
      return new ToolMessage({
        ...id,
        content,
        tool_call_id: String(chat['tool_call_id']),
        ...definedFields({ name: t?.name, status: t?.status, artifact: t?.artifact as unknown }),
      });
    }
    case 'assistant': {
      const calls =
        (chat['tool_calls'] as { id: string; function: { name: string; arguments: string } }[] | undefined) ?? [];
      return new AIMessage({
        ...id,
        content,
        tool_calls: calls.map((c) => ({
          id: c.id,
          name: c.function.name,
          args: parseArgs(c.function.arguments),
          type: 'tool_call' as const,
        })),
      });
    }
    case 'system':
    case 'developer':
      return new SystemMessage({ ...id, content });
    default:
      return new HumanMessage({ ...id, content });
  }
}
