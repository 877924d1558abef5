/**
 * After a recovery, through the real proxy (real HTTP on loopback, the real `openai` client, a
 * scripted upstream model that calls the recovery tool for an artifact, then answers): every later
 * upstream request is no larger than the client's own, the recovered output appears in it once,
 * the client's answer carries no text of the recovery round, and its usage counts every round.
 */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { recoveryCall, startHarness, testRunOutput, type Harness } from '../proxy/support/harness.js';
import { anthropic, chat, responses, type Reply } from '../proxy/support/upstream.js';

const BIG = testRunOutput(500); // ~18 kB: reduced to a receipted view at first sight
const OTHER = testRunOutput(400, 1);
const LAST_LINE = 'test/case_0_499.spec.ts: PASS (1ms)';
const ASIDE = 'Recovering the original.';
const tools: OpenAI.Chat.ChatCompletionTool[] = [
  {
    type: 'function',
    function: { name: 'terminal', parameters: { type: 'object', properties: { command: { type: 'string' } } } },
  },
];
const call = (id: string, command: string): OpenAI.Chat.ChatCompletionMessageParam => ({
  role: 'assistant',
  content: null,
  tool_calls: [{ id, type: 'function', function: { name: 'terminal', arguments: JSON.stringify({ command }) } }],
});
const history = (): OpenAI.Chat.ChatCompletionMessageParam[] => [
  { role: 'system', content: 'You are a coding agent. Use the tools.' },
  { role: 'user', content: 'Run the tests and tell me which one was slowest.' },
  call('run-1', 'npm test'),
  { role: 'tool', tool_call_id: 'run-1', content: BIG },
  call('run-2', 'npm test -- --shard 2'),
  { role: 'tool', tool_call_id: 'run-2', content: OTHER },
];

const withUsage = (reply: Reply, prompt: number, completion: number): Reply => {
  const json = (reply as { json: Record<string, unknown> }).json;
  return {
    json: {
      ...json,
      usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion },
    },
  };
};
const occurrences = (text: string, part: string): number => text.split(part).length - 1;

/** A scripted stream reporting `usage` where its format does (Chat: a usage chunk before `[DONE]`). */
const streamUsage = (reply: Reply, usage: Record<string, number>): Reply => {
  const events = (reply as { sse: readonly string[] }).sse;
  const out: string[] = [];
  for (const raw of events) {
    const at = raw.indexOf('data: ');
    const head = raw.slice(0, at);
    const text = raw.slice(at + 'data: '.length);
    if (text === '[DONE]') {
      out.push(
        `data: ${JSON.stringify({ id: 'cc-s', object: 'chat.completion.chunk', created: 0, model: 'scripted', choices: [], usage })}`,
        raw,
      );
      continue;
    }
    const json = JSON.parse(text) as { type?: string } & Record<string, Record<string, unknown>>;
    const type = json.type as string | undefined;
    if (type === 'response.completed') json['response']!['usage'] = usage;
    else if (type === 'message_start')
      json['message']!['usage'] = { input_tokens: usage['input_tokens'], output_tokens: 1 };
    else if (type === 'message_delta') json['usage'] = { output_tokens: usage['output_tokens']! };
    out.push(`${head}data: ${JSON.stringify(json)}`);
  }
  return { sse: out };
};

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe('after a recovery through the proxy', () => {
  it('later requests show the recovered output once and are no larger than the client sent; the answer has no recovery text and counts every round', async () => {
    // 0: recover the first receipt (with text beside the call) · 1…: answers.
    h = await startHarness((r, i) =>
      i === 0
        ? withUsage(chat.calls([recoveryCall(r.json)], ASIDE), 1000, 15)
        : withUsage(chat.text(`answer ${i}`), 2000, 25),
    );
    const client = new OpenAI({ apiKey: 'sk-test', baseURL: `${h.url}/v1`, maxRetries: 0 });
    const messages = history();
    const clientBodies: number[] = [];
    const answers: OpenAI.Chat.ChatCompletion[] = [];
    for (const next of ['Which file was it in?', 'And the second slowest?', 'Thanks.']) {
      clientBodies.push(Buffer.byteLength(JSON.stringify({ model: 'gpt-4o', messages, tools })));
      const done = await client.chat.completions.create({ model: 'gpt-4o', messages, tools });
      answers.push(done);
      messages.push(done.choices[0]!.message as OpenAI.Chat.ChatCompletionMessageParam, {
        role: 'user',
        content: next,
      });
    }
    const r = h.upstream.requests;
    expect(r).toHaveLength(4); // the recovery round, its continuation, two later requests
    expect(answers[0]!.choices[0]!.message.content).toBe('answer 1');
    expect(JSON.stringify(answers[0])).not.toContain(ASIDE);
    // Usage adds up both rounds of the first answer.
    expect(answers[0]!.usage).toEqual({ prompt_tokens: 3000, completion_tokens: 40, total_tokens: 3040 });
    expect(answers[1]!.usage).toEqual({ prompt_tokens: 2000, completion_tokens: 25, total_tokens: 2025 });
    for (const [k, later] of [r[2]!, r[3]!].entries()) {
      const body = later.body.toString('utf8');
      expect(later.body.length, `later request ${k}`).toBeLessThanOrEqual(clientBodies[k + 1]!);
      expect(occurrences(body, LAST_LINE), `later request ${k}: the recovered output once`).toBe(1);
      expect(body).not.toContain(ASIDE);
    }
  });

  it('streams the answer without the text the model wrote beside its recovery call', async () => {
    h = await startHarness((r, i) =>
      i === 0 ? chat.streamCalls([recoveryCall(r.json)], ASIDE) : chat.streamText(['The slowest ', 'was case 96.']),
    );
    const client = new OpenAI({ apiKey: 'sk-test', baseURL: `${h.url}/v1`, maxRetries: 0 });
    const stream = await client.chat.completions.create({ model: 'gpt-4o', messages: history(), tools, stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(text).toBe('The slowest was case 96.');
    expect(h.upstream.requests).toHaveLength(2);
  });

  it('streams a Chat answer whose usage counts every round', async () => {
    h = await startHarness((r, i) =>
      i === 0
        ? streamUsage(chat.streamCalls([recoveryCall(r.json)], ASIDE), {
            prompt_tokens: 1000,
            completion_tokens: 15,
            total_tokens: 1015,
          })
        : streamUsage(chat.streamText(['The slowest ', 'was case 96.']), {
            prompt_tokens: 2000,
            completion_tokens: 25,
            total_tokens: 2025,
          }),
    );
    const client = new OpenAI({ apiKey: 'sk-test', baseURL: `${h.url}/v1`, maxRetries: 0 });
    const stream = await client.chat.completions.create({
      model: 'gpt-4o',
      messages: history(),
      tools,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    const usages: unknown[] = [];
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      if (chunk.usage) usages.push(chunk.usage);
    }
    expect(text).toBe('The slowest was case 96.');
    expect(usages).toEqual([{ prompt_tokens: 3000, completion_tokens: 40, total_tokens: 3040 }]);
    expect(h.upstream.requests).toHaveLength(2);
  });

  it("streams a Responses answer without the recovery round's text, its usage counting every round", async () => {
    h = await startHarness((r, i) =>
      i === 0
        ? streamUsage(responses.stream([{ text: ASIDE }, recoveryCall(r.json)]), {
            input_tokens: 1000,
            output_tokens: 15,
            total_tokens: 1015,
          })
        : streamUsage(responses.stream([{ text: 'The slowest was case 96.' }], 'resp-final'), {
            input_tokens: 2000,
            output_tokens: 25,
            total_tokens: 2025,
          }),
    );
    const client = new OpenAI({ apiKey: 'sk-test', baseURL: `${h.url}/v1`, maxRetries: 0 });
    const stream = await client.responses.create({
      model: 'gpt-4.1',
      input: [
        { role: 'user', content: 'Run the tests and tell me which one was slowest.' },
        {
          type: 'function_call',
          call_id: 'run-1',
          name: 'terminal',
          arguments: JSON.stringify({ command: 'npm test' }),
        },
        { type: 'function_call_output', call_id: 'run-1', output: BIG },
      ],
      stream: true,
    });
    let text = '';
    const seen: string[] = [];
    let completed: OpenAI.Responses.Response | undefined;
    for await (const event of stream) {
      seen.push(JSON.stringify(event));
      if (event.type === 'response.output_text.delta') text += event.delta;
      if (event.type === 'response.completed') completed = event.response;
    }
    expect(h.upstream.requests).toHaveLength(2);
    expect(text).toBe('The slowest was case 96.');
    expect(seen.join('\n')).not.toContain(ASIDE);
    expect(completed?.output.map((o) => o.type)).toEqual(['message']);
    expect(completed?.usage).toEqual({ input_tokens: 3000, output_tokens: 40, total_tokens: 3040 });
  });

  it("streams an Anthropic message without the recovery round's text, its usage counting every round", async () => {
    h = await startHarness((r, i) =>
      i === 0
        ? streamUsage(anthropic.stream([{ text: ASIDE }, recoveryCall(r.json)]), {
            input_tokens: 1000,
            output_tokens: 15,
          })
        : streamUsage(anthropic.stream([{ text: 'The slowest was case 96.' }]), {
            input_tokens: 2000,
            output_tokens: 25,
          }),
    );
    const client = new Anthropic({ apiKey: 'sk-ant-test', baseURL: h.url, maxRetries: 0 });
    const stream = client.messages.stream({
      model: 'claude-sonnet-4-5',
      max_tokens: 1024,
      system: 'You are a coding agent. Use the tools.',
      messages: [
        { role: 'user', content: 'Run the tests and tell me which one was slowest.' },
        {
          role: 'assistant',
          content: [{ type: 'tool_use', id: 'run-1', name: 'terminal', input: { command: 'npm test' } }],
        },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'run-1', content: BIG }] },
      ],
      tools: [{ name: 'terminal', input_schema: { type: 'object' } }],
    });
    const seen: string[] = [];
    stream.on('streamEvent', (event) => seen.push(JSON.stringify(event)));
    const final = await stream.finalMessage();
    expect(h.upstream.requests).toHaveLength(2);
    expect(final.content).toEqual([{ type: 'text', text: 'The slowest was case 96.' }]);
    expect(seen.join('\n')).not.toContain('Recovering'); // the scripted stream splits text at spaces
    expect(final.usage).toMatchObject({ input_tokens: 3000, output_tokens: 40 });
  });
});
