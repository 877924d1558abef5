/**
 * The proxy with the real `openai` and `@anthropic-ai/sdk` clients (baseURL at the proxy) in front
 * of a scripted loopback upstream: tool outputs become receipts on the wire, the recovery tool is
 * offered, a model call to it is answered from the vault and the client only ever sees the final
 * answer, whole and streamed, in all three APIs.
 */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { recoveryCall, startHarness, testRunOutput, type Harness } from '../proxy/support/harness.js';
import { anthropic, chat, responses, type Recorded } from '../proxy/support/upstream.js';

// Under TOKEN_TERMINATOR_MAX_INLINE_CHARS, so the recovered exchange is shown again as it is.
const BIG = testRunOutput(500);
const SYSTEM = 'You are a coding agent. Use the tools.';
const toolNames = (r: Recorded): string[] =>
  ((r.json?.['tools'] as { name?: string; function?: { name: string } }[] | undefined) ?? []).map(
    (t) => t.function?.name ?? t.name ?? '',
  );

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const chatHistory = (): OpenAI.Chat.ChatCompletionMessageParam[] => [
  { role: 'system', content: SYSTEM },
  { role: 'user', content: 'Run the tests and tell me how many pass.' },
  {
    role: 'assistant',
    content: null,
    tool_calls: [
      {
        id: 'run-1',
        type: 'function',
        function: { name: 'terminal', arguments: JSON.stringify({ command: 'npm test' }) },
      },
    ],
  },
  { role: 'tool', tool_call_id: 'run-1', content: BIG },
];
const chatTools: OpenAI.Chat.ChatCompletionTool[] = [
  {
    type: 'function',
    function: { name: 'terminal', parameters: { type: 'object', properties: { command: { type: 'string' } } } },
  },
];

/** The recovery result the proxy sent upstream in its continuation request (chat). */
function recoveredChat(r: Recorded): string {
  const messages = r.json?.['messages'] as { role: string; tool_call_id?: string; content?: string }[];
  const result = messages.find((m) => m.role === 'tool' && m.tool_call_id === 'tt-1');
  return (JSON.parse(result?.content ?? '{}') as { content?: string }).content ?? '';
}

describe('proxy recovery: Chat Completions', () => {
  it('sends a receipt and the recovery tool upstream, answers the call from the vault, and returns only the final answer', async () => {
    h = await startHarness((r, i) => (i === 0 ? chat.calls([recoveryCall(r.json)]) : chat.text('1500 tests pass.')));
    const client = new OpenAI({ apiKey: 'sk-test', baseURL: `${h.url}/v1`, maxRetries: 0 });
    const completion = await client.chat.completions.create({
      model: 'gpt-4o',
      messages: chatHistory(),
      tools: chatTools,
    });

    expect(completion.choices[0]!.message.content).toBe('1500 tests pass.');
    expect(completion.choices[0]!.message.tool_calls).toBeUndefined();
    const [first, second] = h.upstream.requests;
    expect(h.upstream.requests).toHaveLength(2);
    expect(first!.body.length).toBeLessThan(BIG.length / 4);
    const toolContent = (first!.json!['messages'] as { role: string; content: string }[]).find(
      (m) => m.role === 'tool',
    )!.content;
    expect(toolContent).toContain('Token Terminator');
    expect(toolNames(first!)).toEqual(['terminal', 'token_terminator']);
    expect(recoveredChat(second!)).toBe(BIG);
  });

  it('streams the final answer around the recovery round and never shows the recovery call', async () => {
    h = await startHarness((r, i) =>
      i === 0 ? chat.streamCalls([recoveryCall(r.json)]) : chat.streamText(['1500 ', 'tests ', 'pass.']),
    );
    const client = new OpenAI({ apiKey: 'sk-test', baseURL: `${h.url}/v1`, maxRetries: 0 });
    const stream = await client.chat.completions.create({
      model: 'gpt-4o',
      messages: chatHistory(),
      tools: chatTools,
      stream: true,
    });
    let text = '';
    const finishes: unknown[] = [];
    let sawToolCall = false;
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      if (choice === undefined) continue;
      text += choice.delta.content ?? '';
      if (choice.delta.tool_calls !== undefined) sawToolCall = true;
      if (choice.finish_reason !== null) finishes.push(choice.finish_reason);
    }
    expect(text).toBe('1500 tests pass.');
    expect(sawToolCall).toBe(false);
    expect(finishes).toEqual(['stop']);
    expect(h.upstream.requests).toHaveLength(2);
    expect(recoveredChat(h.upstream.requests[1]!)).toBe(BIG);
    expect(h.upstream.requests[1]!.json!['stream']).toBe(true);
  });

  it('shows the recovered output once in the next request of the conversation, as the client sent it', async () => {
    h = await startHarness((r, i) =>
      i === 0 ? chat.calls([recoveryCall(r.json)]) : chat.text(i === 1 ? 'done' : 'again'),
    );
    const client = new OpenAI({ apiKey: 'sk-test', baseURL: `${h.url}/v1`, maxRetries: 0 });
    const history = chatHistory();
    const first = await client.chat.completions.create({ model: 'gpt-4o', messages: history, tools: chatTools });
    history.push(first.choices[0]!.message as OpenAI.Chat.ChatCompletionMessageParam, {
      role: 'user',
      content: 'Thanks. Anything else?',
    });
    await client.chat.completions.create({ model: 'gpt-4o', messages: history, tools: chatTools });

    const [, , next] = h.upstream.requests;
    const later = next!.json!['messages'] as { role: string; tool_call_id?: string; content?: string }[];
    // The recovered output rejoins the working set: shown once, as the client sent it; no exchange.
    expect(later.find((m) => m.tool_call_id === 'run-1')!.content).toBe(BIG);
    expect(later.some((m) => m.tool_call_id === 'tt-1')).toBe(false);
    expect(toolNames(next!)).toEqual(['terminal', 'token_terminator']);
  });
});

describe('proxy recovery: a turn that also calls the client tools', () => {
  it('gives the client its own calls only, and shows the recovered output as sent next time', async () => {
    h = await startHarness((r, i) =>
      i === 0
        ? chat.calls([recoveryCall(r.json), { id: 'run-2', name: 'terminal', args: { command: 'npm test -- --bail' } }])
        : chat.text('ok'),
    );
    const client = new OpenAI({ apiKey: 'sk-test', baseURL: `${h.url}/v1`, maxRetries: 0 });
    const history = chatHistory();
    const first = await client.chat.completions.create({ model: 'gpt-4o', messages: history, tools: chatTools });
    const message = first.choices[0]!.message;
    expect(message.tool_calls?.map((c) => c.id)).toEqual(['run-2']);
    expect(first.choices[0]!.finish_reason).toBe('tool_calls');
    history.push(message as OpenAI.Chat.ChatCompletionMessageParam, {
      role: 'tool',
      tool_call_id: 'run-2',
      content: 'bail: ok',
    });
    await client.chat.completions.create({ model: 'gpt-4o', messages: history, tools: chatTools });
    expect(h.upstream.requests).toHaveLength(2);
    const messages = h.upstream.requests[1]!.json!['messages'] as {
      role: string;
      tool_call_id?: string;
      tool_calls?: { id: string }[];
    }[];
    expect(messages.map((m) => m.tool_call_id ?? m.tool_calls?.map((c) => c.id).join(',') ?? m.role)).toEqual([
      'system',
      'user',
      'run-1',
      'run-1',
      'run-2',
      'run-2',
    ]);
    // The recovered output rejoined: shown once, as the client sent it, not the exchange again.
    expect(recoveredChat(h.upstream.requests[1]!)).toBe('');
    expect(JSON.stringify(h.upstream.requests[1]!.json)).toContain(JSON.stringify(BIG));
  });
});

describe('proxy recovery: Responses', () => {
  const input = (): OpenAI.Responses.ResponseInput => [
    { role: 'user', content: 'Run the tests.' },
    { type: 'function_call', call_id: 'run-1', name: 'terminal', arguments: JSON.stringify({ command: 'npm test' }) },
    { type: 'function_call_output', call_id: 'run-1', output: BIG },
  ];
  const recovered = (r: Recorded): string => {
    const items = r.json?.['input'] as { type?: string; call_id?: string; output?: string }[];
    return (
      (
        JSON.parse(items.find((x) => x.type === 'function_call_output' && x.call_id === 'tt-1')?.output ?? '{}') as {
          content?: string;
        }
      ).content ?? ''
    );
  };

  it('answers the recovery call and returns the final response', async () => {
    h = await startHarness((r, i) =>
      i === 0 ? responses.reply([recoveryCall(r.json)]) : responses.reply([{ text: 'All pass.' }], 'resp-final'),
    );
    const client = new OpenAI({ apiKey: 'sk-test', baseURL: `${h.url}/v1`, maxRetries: 0 });
    const response = await client.responses.create({
      model: 'gpt-4.1',
      instructions: SYSTEM,
      input: input(),
      tools: [{ type: 'function', name: 'terminal', parameters: {}, strict: false }],
    });
    expect(response.output_text).toBe('All pass.');
    expect(response.output.some((o) => o.type === 'function_call')).toBe(false);
    expect(toolNames(h.upstream.requests[0]!)).toEqual(['terminal', 'token_terminator']);
    expect(recovered(h.upstream.requests[1]!)).toBe(BIG);
  });

  it('streams the final answer with one response.created and renumbered events', async () => {
    h = await startHarness((r, i) =>
      i === 0
        ? responses.stream([{ text: 'Checking. ' }, recoveryCall(r.json)])
        : responses.stream([{ text: 'All pass.' }], 'resp-final'),
    );
    const client = new OpenAI({ apiKey: 'sk-test', baseURL: `${h.url}/v1`, maxRetries: 0 });
    const stream = await client.responses.create({ model: 'gpt-4.1', input: input(), stream: true });
    const types: string[] = [];
    const sequence: number[] = [];
    let text = '';
    let completed: OpenAI.Responses.Response | undefined;
    for await (const event of stream) {
      types.push(event.type);
      sequence.push(event.sequence_number);
      if (event.type === 'response.output_text.delta') text += event.delta;
      if (event.type === 'response.completed') completed = event.response;
      if (event.type === 'response.output_item.added') expect(event.item.type).toBe('message');
    }
    // The text the model wrote beside its recovery call is the recovery round's: the client never sees it.
    expect(text).toBe('All pass.');
    expect(types.filter((t) => t === 'response.created')).toHaveLength(1);
    expect(types.filter((t) => t === 'response.completed')).toHaveLength(1);
    expect(sequence).toEqual(sequence.map((_, i) => i));
    expect(completed?.output.map((o) => o.type)).toEqual(['message']);
    expect(recovered(h.upstream.requests[1]!)).toBe(BIG);
  });
});

describe('proxy recovery: Anthropic Messages', () => {
  const messages = (): Anthropic.MessageParam[] => [
    { role: 'user', content: 'Run the tests.' },
    {
      role: 'assistant',
      content: [{ type: 'tool_use', id: 'run-1', name: 'terminal', input: { command: 'npm test' } }],
    },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'run-1', content: BIG }] },
  ];
  const recovered = (r: Recorded): string => {
    const list = r.json?.['messages'] as { role: string; content: unknown }[];
    for (const m of list) {
      if (!Array.isArray(m.content)) continue;
      for (const b of m.content as { type: string; tool_use_id?: string; content?: string }[]) {
        if (b.type === 'tool_result' && b.tool_use_id === 'tt-1')
          return (JSON.parse(b.content ?? '{}') as { content?: string }).content ?? '';
      }
    }
    return '';
  };

  it('answers the recovery call and returns the final message', async () => {
    h = await startHarness((r, i) => (i === 0 ? anthropic.calls([recoveryCall(r.json)]) : anthropic.text('All pass.')));
    const client = new Anthropic({ apiKey: 'sk-ant-test', baseURL: h.url, maxRetries: 0 });
    const message = await client.messages.create({
      model: 'claude-sonnet-4-5',
      max_tokens: 1024,
      system: SYSTEM,
      messages: messages(),
      tools: [{ name: 'terminal', input_schema: { type: 'object' } }],
    });
    expect(message.content).toEqual([{ type: 'text', text: 'All pass.' }]);
    expect(toolNames(h.upstream.requests[0]!)).toEqual(['terminal', 'token_terminator']);
    expect(
      String(
        (h.upstream.requests[0]!.json!['messages'] as { content: { content?: string }[] }[])[2]!.content[0]!.content,
      ),
    ).toContain('Token Terminator');
    expect(h.upstream.requests[0]!.body.length).toBeLessThan(BIG.length / 4);
    expect(recovered(h.upstream.requests[1]!)).toBe(BIG);
  });

  it('streams the final message with consistent block indices', async () => {
    h = await startHarness((r, i) =>
      i === 0
        ? anthropic.stream([{ text: 'Checking. ' }, recoveryCall(r.json)])
        : anthropic.stream([{ text: 'All pass.' }]),
    );
    const client = new Anthropic({ apiKey: 'sk-ant-test', baseURL: h.url, maxRetries: 0 });
    const stream = client.messages.stream({
      model: 'claude-sonnet-4-5',
      max_tokens: 1024,
      system: SYSTEM,
      messages: messages(),
      tools: [{ name: 'terminal', input_schema: { type: 'object' } }],
    });
    const final = await stream.finalMessage();
    // The text the model wrote beside its recovery call is the recovery round's: the client never sees it.
    expect(final.content).toEqual([{ type: 'text', text: 'All pass.' }]);
    expect(final.stop_reason).toBe('end_turn');
    expect(recovered(h.upstream.requests[1]!)).toBe(BIG);
  });
});
