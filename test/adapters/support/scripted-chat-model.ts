/**
 * A small LangChain chat model that plays a script instead of calling a provider. Each step sees
 * the messages of the call and returns the AIMessage fields to answer with. Every call is logged
 * (message types and contents, the instance's `maxTokens`) so tests can assert what the model saw.
 */
import { BaseChatModel, type BaseChatModelParams } from '@langchain/core/language_models/chat_models';
import { AIMessage, type BaseMessage } from '@langchain/core/messages';
import type { ChatResult } from '@langchain/core/outputs';

export interface ScriptedCall {
  readonly messages: readonly { readonly type: string; readonly content: string }[];
  readonly maxTokens: number | undefined;
  /** Names of the tools bound when the call ran. */
  readonly tools: readonly string[];
}

export type ScriptStep = (messages: readonly BaseMessage[]) => {
  content?: string;
  tool_calls?: { id: string; name: string; args: Record<string, unknown> }[];
};

export interface ScriptedFields extends BaseChatModelParams {
  readonly script: ScriptStep[];
  readonly log: ScriptedCall[];
  readonly cursor?: { i: number };
  readonly maxTokens?: number;
}

const text = (m: BaseMessage): string => (typeof m.content === 'string' ? m.content : JSON.stringify(m.content));

export class ScriptedChatModel extends BaseChatModel {
  maxTokens: number | undefined;
  readonly script: ScriptStep[];
  readonly log: ScriptedCall[];
  readonly cursor: { i: number };

  constructor(fields: ScriptedFields) {
    super(fields);
    this.script = fields.script;
    this.log = fields.log;
    this.cursor = fields.cursor ?? { i: 0 };
    this.maxTokens = fields.maxTokens;
  }

  _llmType(): string {
    return 'scripted';
  }

  boundTools: readonly string[] = [];

  override bindTools(tools: readonly unknown[]): this {
    this.boundTools = tools.map((t) => String((t as { name?: unknown }).name ?? ''));
    return this;
  }

  async _generate(messages: BaseMessage[], options: this['ParsedCallOptions']): Promise<ChatResult> {
    options.signal?.throwIfAborted();
    this.log.push({
      messages: messages.map((m) => ({ type: m.getType(), content: text(m) })),
      maxTokens: this.maxTokens,
      tools: this.boundTools,
    });
    const step: ScriptStep = this.script[this.cursor.i++] ?? (() => ({ content: 'done' }));
    const out = step(messages);
    const message = new AIMessage({
      content: out.content ?? '',
      tool_calls: (out.tool_calls ?? []).map((c) => ({ ...c, type: 'tool_call' as const })),
    });
    return { generations: [{ text: out.content ?? '', message }] };
  }
}
