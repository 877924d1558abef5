import { fc, test } from '@fast-check/vitest';
import { AIMessage, HumanMessage, SystemMessage, ToolMessage, type BaseMessage } from '@langchain/core/messages';
import { describe, expect, it } from 'vitest';
import { fromChatRequest, toChatRequest } from '../../../adapters/langgraph/messages.js';

const conversation = fc
  .array(fc.tuple(fc.string(), fc.string({ minLength: 1 })), { minLength: 1, maxLength: 6 })
  .map((turns) =>
    turns.flatMap(([question, output], i): BaseMessage[] => [
      new HumanMessage(question),
      new AIMessage({
        content: '',
        tool_calls: [{ id: `c${i}`, name: 'grep', args: { q: question }, type: 'tool_call' }],
      }),
      new ToolMessage({ content: output, tool_call_id: `c${i}`, name: 'grep', artifact: { n: i } }),
    ]),
  );

describe('LangChain messages ↔ Chat Completions', () => {
  test.prop([conversation], { numRuns: 50 })(
    'maps an untouched request back to the very same message objects',
    (messages) => {
      const system = new SystemMessage('be brief');
      const conversion = toChatRequest({ messages, systemMessage: system });
      const back = fromChatRequest(conversion.request, conversion);
      expect(back.messages).toHaveLength(messages.length);
      back.messages.forEach((m, i) => expect(m).toBe(messages[i]));
      expect(back.systemMessage).toBeUndefined();
    },
  );

  test.prop([conversation, fc.nat()], { numRuns: 50 })(
    'rebuilds a changed tool message with its call id, name and artifact',
    (messages, pick) => {
      const conversion = toChatRequest({ messages });
      const chat = conversion.request['messages'] as Record<string, unknown>[];
      const tools = chat.map((m, i) => [m, i] as const).filter(([m]) => m['role'] === 'tool');
      const [target, index] = tools[pick % tools.length]!;
      const compiled = {
        ...conversion.request,
        messages: chat.map((m) => (m === target ? { ...m, content: 'RECEIPT' } : m)),
      };
      const back = fromChatRequest(compiled, conversion);
      const rebuilt = back.messages[index] as ToolMessage;
      const original = messages[index] as ToolMessage;
      expect(rebuilt).not.toBe(original);
      expect(rebuilt.content).toBe('RECEIPT');
      expect(rebuilt.tool_call_id).toBe(original.tool_call_id);
      expect(rebuilt.name).toBe('grep');
      expect(rebuilt.artifact).toEqual(original.artifact);
      expect(original.content).not.toBe('RECEIPT');
    },
  );

  it('carries assistant tool calls as JSON arguments and parses them back', () => {
    const ai = new AIMessage({
      content: '',
      tool_calls: [{ id: 'x', name: 'read', args: { path: 'a b' }, type: 'tool_call' }],
    });
    const conversion = toChatRequest({ messages: [ai], maxTokens: 99, model: 'm' });
    expect(conversion.request).toMatchObject({
      model: 'm',
      max_tokens: 99,
      messages: [
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'x', type: 'function', function: { name: 'read', arguments: '{"path":"a b"}' } }],
        },
      ],
    });
    const chat = conversion.request['messages'] as Record<string, unknown>[];
    const back = fromChatRequest({ messages: [{ ...chat[0] }] }, conversion);
    expect((back.messages[0] as AIMessage).tool_calls).toEqual([
      { id: 'x', name: 'read', args: { path: 'a b' }, type: 'tool_call' },
    ]);
  });

  it('returns a replacement system message when the pipeline changed it', () => {
    const conversion = toChatRequest({
      messages: [new HumanMessage('hi')],
      systemMessage: new SystemMessage('long prompt'),
    });
    const chat = conversion.request['messages'] as Record<string, unknown>[];
    const back = fromChatRequest({ messages: [{ role: 'system', content: 'short' }, chat[1]] }, conversion);
    expect(back.systemMessage?.content).toBe('short');
    expect(back.messages).toHaveLength(1);
  });
});
