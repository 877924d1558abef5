/**
 * Issue #13, build item 2: the client wrappers offer the recovery tool whenever a request they
 * send carries a receipt (as the last tool, from then on for the whole session), and with
 * `handleRecovery: true` answer the model's calls to it themselves.
 */
import { fc, test } from '@fast-check/vitest';
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { recoveryToolDefinition, wrapAnthropic, wrapOpenAI } from '../../../adapters/custom-loop/index.js';
import { referencedArtifacts } from '../../../src/receipts/index.js';
import type { ProviderRequest } from '../../../src/step.js';
import { toolOutput } from '../../../src/testing/arbitraries/text.js';
import { createFakeTerminator } from '../support/fake-terminator.js';
import { chatReply, chatToolCall, startScriptedServer, type ScriptedServer } from '../support/scripted-http-server.js';

type Format = 'chat' | 'responses' | 'anthropic';
const NAME = 'token_terminator';

const toolNames = (request: ProviderRequest): string[] =>
  ((request['tools'] as { name?: string; function?: { name: string } }[] | undefined) ?? []).map(
    (t) => t.function?.name ?? t.name ?? '',
  );
const receiptIn = (request: ProviderRequest): boolean =>
  referencedArtifacts(JSON.stringify(request).replace(/\\n/g, '\n')).length > 0;

/** A structural client for each format that records what it is sent and answers with plain text. */
function fakeClient(format: Format, sent: ProviderRequest[]) {
  const answer = (body: ProviderRequest): Promise<unknown> => {
    sent.push(body);
    if (format === 'chat')
      return Promise.resolve({
        choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
      });
    if (format === 'responses')
      return Promise.resolve({
        id: 'r',
        output: [{ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'ok' }] }],
      });
    return Promise.resolve({ content: [{ type: 'text', text: 'ok' }], stop_reason: 'end_turn' });
  };
  return { chat: { completions: { create: answer } }, responses: { create: answer }, messages: { create: answer } };
}

/** One turn's conversation items: a call of the caller's tool and its output, in the format's shape. */
function turnItems(format: Format, i: number, output: string): unknown[] {
  const id = `call-${i}`;
  if (format === 'chat')
    return [
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id, type: 'function', function: { name: 'search_files', arguments: '{}' } }],
      },
      { role: 'tool', tool_call_id: id, content: output },
    ];
  if (format === 'responses')
    return [
      { type: 'function_call', call_id: id, name: 'search_files', arguments: '{}' },
      { type: 'function_call_output', call_id: id, output },
    ];
  return [
    { role: 'assistant', content: [{ type: 'tool_use', id, name: 'search_files', input: {} }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: id, content: output }] },
  ];
}

const callerTool = (format: Format): Record<string, unknown> =>
  format === 'chat'
    ? { type: 'function', function: { name: 'search_files', parameters: { type: 'object' } } }
    : format === 'responses'
      ? { type: 'function', name: 'search_files', parameters: {}, strict: false }
      : { name: 'search_files', input_schema: { type: 'object' } };

describe('the wrappers offer the recovery tool', () => {
  test.prop(
    [
      fc.constantFrom<Format>('chat', 'responses', 'anthropic'),
      fc.array(toolOutput(), { minLength: 1, maxLength: 5 }),
      fc.boolean(),
    ],
    { numRuns: 40 },
  )(
    'every request sent with a receipt offers it once, as the last tool, and keeps offering it',
    async (format, outputs, callerOffers) => {
      const terminator = createFakeTerminator({ threshold: 2000 });
      const sent: ProviderRequest[] = [];
      const client = fakeClient(format, sent);
      const create =
        format === 'anthropic'
          ? wrapAnthropic(client, terminator, { sessionId: 's' }).messages.create
          : format === 'responses'
            ? wrapOpenAI(client, terminator, { sessionId: 's' }).responses!.create
            : wrapOpenAI(client, terminator, { sessionId: 's' }).chat.completions.create;
      const tools = [callerTool(format), ...(callerOffers ? [recoveryToolDefinition(terminator, format)] : [])];
      const items: unknown[] = [
        format === 'responses' ? { role: 'user', content: 'go' } : { role: 'user', content: 'go' },
      ];
      for (const [i, output] of outputs.entries()) {
        items.push(...turnItems(format, i, output));
        const body =
          format === 'responses'
            ? { model: 'gpt-4.1', input: [...items], tools }
            : { model: 'm', max_tokens: 100, messages: [...items], tools };
        await (create as (b: unknown) => Promise<unknown>)(body);
      }
      let offeredFrom: number | undefined;
      sent.forEach((request, i) => {
        const names = toolNames(request);
        expect(names.filter((n) => n === NAME).length).toBeLessThanOrEqual(1);
        expect(names[0]).toBe('search_files');
        if (receiptIn(request)) expect(names).toContain(NAME);
        if (names.includes(NAME)) offeredFrom ??= i;
        if (offeredFrom !== undefined) expect(names.at(-1)).toBe(NAME);
      });
    },
  );
});

describe('wrapOpenAI({ handleRecovery: true })', () => {
  let server: ScriptedServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  test.prop(
    [
      toolOutput({ sizes: ['medium'] }).filter((s) => s.length >= 2500),
      fc.constantFrom<Format>('chat', 'responses', 'anthropic'),
    ],
    { numRuns: 30 },
  )(
    'a scripted model that calls the tool gets the exact content, and the caller sees only the final answer',
    async (output, format) => {
      const terminator = createFakeTerminator({ threshold: 2000 });
      const seen: ProviderRequest[] = [];
      const id = (body: ProviderRequest): string =>
        referencedArtifacts(JSON.stringify(body).replace(/\\n/g, '\n'))[0] ?? 'none';
      const recovered = (body: ProviderRequest): string | undefined => {
        const text = JSON.stringify(body);
        if (!text.includes('"rec-1"')) return undefined;
        const list = (body['messages'] ?? body['input']) as Record<string, unknown>[];
        for (const item of list) {
          if (item['tool_call_id'] === 'rec-1') return String(item['content']);
          if (item['call_id'] === 'rec-1' && item['type'] === 'function_call_output') return String(item['output']);
          if (Array.isArray(item['content']))
            for (const b of item['content'] as Record<string, unknown>[])
              if (b['tool_use_id'] === 'rec-1') return String(b['content']);
        }
        return undefined;
      };
      const model = (body: ProviderRequest): Promise<unknown> => {
        seen.push(body);
        const answer = recovered(body);
        const args = JSON.stringify({ action: 'artifact_get', artifact_id: id(body), limit: 20000 });
        if (format === 'chat') {
          return Promise.resolve(
            answer === undefined
              ? {
                  choices: [
                    {
                      index: 0,
                      message: {
                        role: 'assistant',
                        content: null,
                        tool_calls: [{ id: 'rec-1', type: 'function', function: { name: NAME, arguments: args } }],
                      },
                      finish_reason: 'tool_calls',
                    },
                  ],
                }
              : { choices: [{ index: 0, message: { role: 'assistant', content: 'final' }, finish_reason: 'stop' }] },
          );
        }
        if (format === 'responses') {
          return Promise.resolve(
            answer === undefined
              ? { id: 'r1', output: [{ type: 'function_call', call_id: 'rec-1', name: NAME, arguments: args }] }
              : {
                  id: 'r2',
                  output: [{ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'final' }] }],
                },
          );
        }
        return Promise.resolve(
          answer === undefined
            ? {
                content: [{ type: 'tool_use', id: 'rec-1', name: NAME, input: JSON.parse(args) }],
                stop_reason: 'tool_use',
              }
            : { content: [{ type: 'text', text: 'final' }], stop_reason: 'end_turn' },
        );
      };
      const client = {
        chat: { completions: { create: model } },
        responses: { create: model },
        messages: { create: model },
      };
      const options = { sessionId: 's', handleRecovery: true };
      const items = [{ role: 'user', content: 'go' }, ...turnItems(format, 0, output)];
      const result =
        format === 'anthropic'
          ? await wrapAnthropic(client, terminator, options).messages.create({
              model: 'm',
              max_tokens: 100,
              messages: items,
            } as never)
          : format === 'responses'
            ? await wrapOpenAI(client, terminator, options).responses!.create({ model: 'm', input: items } as never)
            : await wrapOpenAI(client, terminator, options).chat.completions.create({
                model: 'm',
                messages: items,
              } as never);
      expect(seen).toHaveLength(2);
      expect(toolNames(seen[0]!)).toContain(NAME);
      const page = JSON.parse(recovered(seen[1]!) ?? '{}') as { content?: string; next_offset?: number | null };
      expect(page.next_offset).toBeNull();
      expect(page.content).toBe(output);
      expect(JSON.stringify(result)).toContain('final');
      expect(JSON.stringify(result)).not.toContain(NAME);
    },
  );

  it('works with the real openai client against a loopback scripted model', async () => {
    const terminator = createFakeTerminator({ threshold: 2000 });
    const big = Array.from({ length: 300 }, (_, i) => `row ${i}: ${'value '.repeat(3)}`).join('\n');
    server = await startScriptedServer([
      (body) =>
        chatToolCall('rec-1', NAME, {
          action: 'artifact_get',
          artifact_id: referencedArtifacts(JSON.stringify(body).replace(/\\n/g, '\n'))[0] ?? 'none',
          limit: 20000,
        }),
      () => chatReply({ content: 'the rows are all there' }),
    ]);
    const openai = wrapOpenAI(new OpenAI({ apiKey: 'test', baseURL: `${server.url}/v1`, maxRetries: 0 }), terminator, {
      sessionId: 'real',
      handleRecovery: true,
    });
    const completion = await openai.chat.completions.create({
      model: 'gpt-4o',
      messages: [
        { role: 'user', content: 'list rows' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'c1', type: 'function', function: { name: 'search_files', arguments: '{}' } }],
        },
        { role: 'tool', tool_call_id: 'c1', content: big },
      ],
    });
    expect(completion.choices[0]!.message.content).toBe('the rows are all there');
    expect(completion.choices[0]!.message.tool_calls).toBeUndefined();
    const second = server.requests[1]!.body['messages'] as { role: string; tool_call_id?: string; content?: string }[];
    expect((JSON.parse(second.find((m) => m.tool_call_id === 'rec-1')!.content!) as { content: string }).content).toBe(
      big,
    );
    expect(toolNames(server.requests[0]!.body)).toEqual([NAME]);
  });
});
