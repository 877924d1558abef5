import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import {
  handleRecoveryCall,
  recoveryToolDefinition,
  reduceToolResult,
  wrapAnthropic,
  wrapOpenAI,
} from '../../adapters/custom-loop/index.js';
import { isReceipt, parseReceipt } from '../../src/receipts/index.js';
import { createFakeTerminator } from '../adapters/support/fake-terminator.js';
import {
  anthropicReply,
  chatReply,
  chatToolCall,
  errorReply,
  responsesReply,
  startScriptedServer,
  type ScriptedServer,
  type ServerStep,
} from '../adapters/support/scripted-http-server.js';

const BIG = Array.from({ length: 400 }, (_, i) => `entry ${i} ${'data '.repeat(4)}∑`).join('\n');
const CAP_ERROR =
  "This endpoint's maximum context length is 8192 tokens. However, you requested about 10556 tokens (2364 of text input, 8192 in the output). Please reduce the length of either one.";

let server: ScriptedServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function openaiFor(script: ServerStep[]): Promise<OpenAI> {
  server = await startScriptedServer(script);
  return new OpenAI({ apiKey: 'test', baseURL: `${server.url}/v1`, maxRetries: 0 });
}

type ChatMessage = {
  role: string;
  content?: unknown;
  tool_call_id?: string;
  tool_calls?: { id: string; function: { name: string; arguments: string } }[];
};
const toolMessage = (body: Record<string, unknown>): ChatMessage | undefined =>
  (body['messages'] as ChatMessage[]).find((m) => m.role === 'tool');

describe('custom loop: openai chat.completions', () => {
  it('runs a tool loop: receipt on the wire, exact recovery, host transcript untouched, cap in the body', async () => {
    const terminator = createFakeTerminator();
    const openai = wrapOpenAI(
      await openaiFor([
        () => chatToolCall('c1', 'search_files', { pattern: 'x' }),
        (body) => {
          const receipt = parseReceipt(String(toolMessage(body)?.content));
          return chatToolCall('c2', 'token_terminator', {
            action: 'artifact_get',
            artifact_id: receipt?.artifactId ?? 'none',
            limit: 20000,
            session_id: 'spoofed',
          });
        },
        () => chatReply({ content: 'final' }),
      ]),
      terminator,
      { sessionId: 'loop-1', route: { contextWindow: 32_000 } },
    );
    const messages: ChatMessage[] = [{ role: 'user', content: 'find it' }];
    const tools = [
      { type: 'function', function: { name: 'search_files', parameters: { type: 'object', properties: {} } } },
      recoveryToolDefinition(terminator, 'chat'),
    ];
    let recovered = '';
    for (let turn = 0; turn < 5; turn += 1) {
      const completion = await openai.chat.completions.create({
        model: 'gpt-4o',
        messages: messages as never,
        tools: tools as never,
      });
      const message = completion.choices[0]!.message;
      messages.push(message as ChatMessage);
      if (message.tool_calls === undefined || message.tool_calls.length === 0) break;
      for (const call of message.tool_calls) {
        if (call.type !== 'function') continue;
        const content =
          call.function.name === 'token_terminator'
            ? (recovered = await handleRecoveryCall(terminator, call.function.arguments, 'loop-1'))
            : (
                await reduceToolResult(
                  terminator,
                  { callId: call.id, name: call.function.name, args: {}, content: BIG },
                  { sessionId: 'loop-1' },
                )
              ).content;
        messages.push({ role: 'tool', tool_call_id: call.id, content });
      }
    }
    const wire = server!.requests;
    expect(wire).toHaveLength(3);
    expect(isReceipt(String(toolMessage(wire[1]!.body)?.content))).toBe(true);
    expect(JSON.stringify(wire[1]!.body).includes('entry 399')).toBe(false);
    expect((JSON.parse(recovered) as { content: string }).content).toBe(BIG);
    expect(messages[2]!.content).toBe(BIG);
    for (const r of wire) {
      expect(r.body['max_completion_tokens']).toBeGreaterThan(0);
      expect(r.body['max_completion_tokens']).toBeLessThan(32_000);
    }
    expect(terminator.calls.every((c) => c.context.sessionId === 'loop-1')).toBe(true);
  });

  it('retries once with the available output a cap error names', async () => {
    const terminator = createFakeTerminator();
    const openai = wrapOpenAI(
      await openaiFor([() => errorReply(400, CAP_ERROR), () => chatReply({ content: 'ok' })]),
      terminator,
    );
    const completion = await openai.chat.completions.create({
      model: 'm',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 8192,
    });
    expect(completion.choices[0]!.message.content).toBe('ok');
    expect(server!.requests.map((r) => r.body['max_tokens'])).toEqual([8192, 5828]);
  });

  it('retries at most once and surfaces the provider error', async () => {
    const openai = wrapOpenAI(
      await openaiFor([
        () => errorReply(400, CAP_ERROR),
        () => errorReply(400, CAP_ERROR),
        () => chatReply({ content: 'x' }),
      ]),
      createFakeTerminator(),
    );
    await expect(
      openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8192 }),
    ).rejects.toThrow(/maximum context length/);
    expect(server!.requests).toHaveLength(2);
  });

  it('does not retry an error that is not about the output cap', async () => {
    const openai = wrapOpenAI(
      await openaiFor([() => errorReply(400, 'invalid model'), () => chatReply({ content: 'x' })]),
      createFakeTerminator(),
    );
    await expect(
      openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8192 }),
    ).rejects.toThrow(/invalid model/);
    expect(server!.requests).toHaveLength(1);
  });

  it('sends the original request when the pipeline fails', async () => {
    const terminator = createFakeTerminator({ fail: true });
    const openai = wrapOpenAI(await openaiFor([() => chatReply({ content: 'ok' })]), terminator, {
      route: { contextWindow: 32_000 },
    });
    const body = {
      model: 'm',
      messages: [
        { role: 'user', content: 'hi' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'c1', type: 'function', function: { name: 't', arguments: '{}' } }],
        },
        { role: 'tool', tool_call_id: 'c1', content: BIG },
      ],
    };
    await openai.chat.completions.create(body as never);
    expect(server!.requests[0]!.body).toEqual(body);
  });

  it('aborting cancels the HTTP request in flight', async () => {
    const openai = wrapOpenAI(await openaiFor([() => 'hang']), createFakeTerminator());
    const controller = new AbortController();
    const pending = openai.chat.completions.create(
      { model: 'm', messages: [{ role: 'user', content: 'hi' }] },
      { signal: controller.signal },
    );
    await expect.poll(() => server!.requests.length).toBe(1);
    controller.abort();
    await expect(pending).rejects.toThrow(/abort/i);
    await expect.poll(() => server!.dropped).toBe(1);
  });

  it('aborting during the compile drops it and never dispatches', async () => {
    const terminator = createFakeTerminator({ hangCompile: true });
    const openai = wrapOpenAI(await openaiFor([() => chatReply({ content: 'x' })]), terminator);
    const controller = new AbortController();
    const pending = openai.chat.completions.create(
      { model: 'm', messages: [{ role: 'user', content: 'hi' }] },
      { signal: controller.signal },
    );
    await expect.poll(() => terminator.calls.length).toBe(1);
    controller.abort();
    await expect(pending).rejects.toThrow(/abort/i);
    expect(terminator.calls[0]!.signal?.aborted).toBe(true);
    expect(server!.requests).toHaveLength(0);
  });

  it('keeps withResponse() usable', async () => {
    const openai = wrapOpenAI(await openaiFor([() => chatReply({ content: 'ok' })]), createFakeTerminator());
    const { data, response } = await openai.chat.completions
      .create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] })
      .withResponse();
    expect(data.choices[0]!.message.content).toBe('ok');
    expect(response.status).toBe(200);
  });
});

describe('custom loop: openai responses', () => {
  it('receipts a large function_call_output and sets max_output_tokens', async () => {
    const terminator = createFakeTerminator();
    const openai = wrapOpenAI(
      await openaiFor([
        () =>
          responsesReply([
            {
              type: 'message',
              id: 'm1',
              role: 'assistant',
              status: 'completed',
              content: [{ type: 'output_text', text: 'ok', annotations: [] }],
            },
          ]),
      ]),
      terminator,
      {
        route: { contextWindow: 32_000 },
      },
    );
    const input = [
      { role: 'user', content: 'go' },
      { type: 'function_call', call_id: 'c1', name: 'search_files', arguments: '{}' },
      { type: 'function_call_output', call_id: 'c1', output: BIG },
    ];
    const response = await openai.responses.create({ model: 'gpt-4o', input: input as never });
    expect(response.output_text).toBe('ok');
    const sent = server!.requests[0]!.body;
    const output = (sent['input'] as { type?: string; output?: string }[]).find(
      (i) => i.type === 'function_call_output',
    )!.output!;
    expect(isReceipt(output)).toBe(true);
    expect(sent['max_output_tokens']).toBeGreaterThan(0);
    expect(input[2]!.output).toBe(BIG);
  });
});

describe('custom loop: anthropic messages', () => {
  it('receipts a large tool_result and lowers max_tokens to what fits', async () => {
    const terminator = createFakeTerminator();
    server = await startScriptedServer([() => anthropicReply([{ type: 'text', text: 'ok' }])]);
    const anthropic = wrapAnthropic(new Anthropic({ apiKey: 'test', baseURL: server.url, maxRetries: 0 }), terminator, {
      route: { contextWindow: 3000 },
    });
    const message = await anthropic.messages.create({
      model: 'claude-x',
      max_tokens: 4096,
      messages: [
        { role: 'user', content: 'go' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'read_log', input: {} }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: BIG }] },
      ],
    });
    expect(message.content[0]).toMatchObject({ type: 'text', text: 'ok' });
    const sent = server.requests[0]!.body;
    const block = ((sent['messages'] as { content: unknown }[])[2]!.content as { content: string }[])[0]!;
    expect(isReceipt(block.content)).toBe(true);
    expect(sent['max_tokens']).toBeLessThan(4096);
    expect(sent['max_tokens']).toBeGreaterThan(0);
    expect(server.requests[0]!.path).toBe('/v1/messages');
  });

  it('retries once on an output-cap error', async () => {
    server = await startScriptedServer([
      () => errorReply(400, CAP_ERROR),
      () => anthropicReply([{ type: 'text', text: 'ok' }]),
    ]);
    const anthropic = wrapAnthropic(
      new Anthropic({ apiKey: 'test', baseURL: server.url, maxRetries: 0 }),
      createFakeTerminator(),
    );
    await anthropic.messages.create({
      model: 'claude-x',
      max_tokens: 8192,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(server.requests.map((r) => r.body['max_tokens'])).toEqual([8192, 5828]);
  });
});
