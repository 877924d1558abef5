/**
 * After a recovery, through the real proxy (real HTTP on loopback, the real `openai` client, a
 * scripted upstream model that calls the recovery tool for an artifact, then answers): every later
 * upstream request is no larger than the client's own, the recovered output appears in it once,
 * the client's answer carries no text of the recovery round, and its usage counts every round.
 */
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { recoveryCall, startHarness, testRunOutput, type Harness } from '../proxy/support/harness.js';
import { chat, type Reply } from '../proxy/support/upstream.js';

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
});
