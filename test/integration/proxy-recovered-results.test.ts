/**
 * The proxy's own recovery results are evidence the model asked for: the request stages never
 * lease, collapse, view or receipt them, however large and however often repeated. Every later
 * request shows each recovered exchange exactly as the model first received it.
 */
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { referencedArtifacts } from '../../src/receipts/index.js';
import { startHarness, testRunOutput, type Harness } from '../proxy/support/harness.js';
import { chat, responses, type Recorded } from '../proxy/support/upstream.js';

// Over TOKEN_TERMINATOR_MAX_INLINE_CHARS (32,000): a request stage would show a bounded view of it.
const HUGE = testRunOutput(1200, 5);
const tools: OpenAI.Chat.ChatCompletionTool[] = [
  {
    type: 'function',
    function: { name: 'terminal', parameters: { type: 'object', properties: { command: { type: 'string' } } } },
  },
];
type Msg = OpenAI.Chat.ChatCompletionMessageParam;
type Wire = { role: string; tool_call_id?: string; content?: string };

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const wire = (r: Recorded): Wire[] => r.json!['messages'] as Wire[];
const resultOf = (r: Recorded, callId: string): string | undefined =>
  wire(r).find((m) => m.role === 'tool' && m.tool_call_id === callId)?.content;

describe('recovered results in later requests', () => {
  it('shows a recovered output once in every later request: as the client sent it, without the exchange', async () => {
    let receipt = '';
    // 0: recover the output's receipt (tt-1) · 1: answer · 2: recover the same receipt again (tt-2) · 3: answer · 4: answer
    h = await startHarness((r, i) => {
      if (i === 0) receipt = referencedArtifacts(r.body.toString('utf8').replace(/\\n/g, '\n'))[0] ?? 'none';
      if (i === 0 || i === 2)
        return chat.calls([
          {
            id: `tt-${i / 2 + 1}`,
            name: 'token_terminator',
            args: { action: 'artifact_get', artifact_id: receipt, limit: 200_000 },
          },
        ]);
      return chat.text(`answer ${i}`);
    });
    const client = new OpenAI({ apiKey: 'sk-test', baseURL: `${h.url}/v1`, maxRetries: 0 });
    const history: Msg[] = [
      { role: 'system', content: 'You are a coding agent.' },
      { role: 'user', content: 'Run the tests.' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'run-1', type: 'function', function: { name: 'terminal', arguments: '{"command":"npm test"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'run-1', content: HUGE },
    ];
    for (const next of ['Which one was slowest?', 'Check again.', 'Thanks.']) {
      const done = await client.chat.completions.create({ model: 'gpt-4o', messages: history, tools });
      history.push(done.choices[0]!.message as Msg, { role: 'user', content: next });
    }
    await client.chat.completions.create({ model: 'gpt-4o', messages: history, tools });
    const r = h.upstream.requests;
    expect(r).toHaveLength(6);
    const first = resultOf(r[1]!, 'tt-1')!;
    expect((JSON.parse(first) as { content: string }).content).toBe(HUGE);
    // The recovered output rejoins the working set: every later request shows it once, as the
    // client sent it, at its own place, and not the recovery exchange again.
    for (const later of [r[2]!, r[4]!, r[5]!]) {
      expect(resultOf(later, 'run-1'), 'the output as the client sent it').toBe(HUGE);
      expect(resultOf(later, 'tt-1'), 'no recovery exchange').toBeUndefined();
      expect(resultOf(later, 'tt-2'), 'no recovery exchange').toBeUndefined();
    }
    // Request 3 is the continuation of the second recovery (which the model made of the shown output).
    expect((JSON.parse(resultOf(r[3]!, 'tt-2')!) as { content: string }).content).toBe(HUGE);
    // And whole prefixes once it rejoined: each request starts with the one before it.
    const e = wire(r[4]!).map((m) => JSON.stringify(m));
    expect(
      wire(r[5]!)
        .slice(0, e.length)
        .map((m) => JSON.stringify(m)),
    ).toEqual(e);
  });

  it('sends a recovered result kept for a chained Responses request as it was answered, though its call is not in the request', async () => {
    let receipt = '';
    h = await startHarness((r, i) => {
      if (i === 0) {
        receipt = referencedArtifacts(r.body.toString('utf8').replace(/\\n/g, '\n'))[0] ?? 'none';
        // Recovery and a client tool in one turn: the client gets its own call, the answered recovery waits for the next request.
        return responses.reply(
          [
            {
              id: 'tt-1',
              name: 'token_terminator',
              args: { action: 'artifact_get', artifact_id: receipt, limit: 200_000 },
            },
            { id: 'run-2', name: 'terminal', args: { command: 'npm test -- --bail' } },
          ],
          'resp-1',
        );
      }
      return responses.reply([{ text: 'done' }], `resp-${i + 1}`);
    });
    // A chained request carries no instruction prefix to derive the session from: the header names it.
    const client = new OpenAI({
      apiKey: 'sk-test',
      baseURL: `${h.url}/v1`,
      maxRetries: 0,
      defaultHeaders: { 'x-token-terminator-session': 'chained' },
    });
    const fnTools: OpenAI.Responses.Tool[] = [{ type: 'function', name: 'terminal', parameters: {}, strict: false }];
    const first = await client.responses.create({
      model: 'gpt-4.1',
      previous_response_id: 'resp-0',
      input: [{ type: 'function_call_output', call_id: 'run-1', output: HUGE }],
      tools: fnTools,
    });
    expect(first.output.map((o) => (o.type === 'function_call' ? o.call_id : o.type))).toEqual(['run-2']);
    await client.responses.create({
      model: 'gpt-4.1',
      previous_response_id: first.id,
      input: [{ type: 'function_call_output', call_id: 'run-2', output: 'bail: ok' }],
      tools: fnTools,
    });
    const r = h.upstream.requests;
    expect(r).toHaveLength(2);
    expect(r[0]!.body.length).toBeLessThan(HUGE.length / 4);
    const items = r[1]!.json!['input'] as { type: string; call_id: string; output: string }[];
    expect(items.map((x) => x.call_id)).toEqual(['tt-1', 'run-2']);
    const result = JSON.parse(items[0]!.output) as { artifact_id: string; content: string };
    expect(result.artifact_id).toBe(receipt);
    expect(result.content).toBe(HUGE);
  });
});
