/**
 * The README's hand-written loops and Agents JS setup, as written, reduce a tool output at its first
 * sight: a real Terminator on a temp vault, the real `openai` and `@anthropic-ai/sdk` clients
 * against a scripted model on loopback, and the Agents JS input filter on SDK items. The model's
 * first view of a 31 kB failing pytest run is smaller, keeps every failure line, names an artifact
 * that recovers the run exactly, and the recovery tool is offered; with `reduceToolOutputs: false`
 * the output reaches the model whole (the behaviour before the wrappers reduced tool outputs).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import type { AgentInputItem } from '@openai/agents';
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { wrapAnthropic, wrapOpenAI } from '../../adapters/custom-loop/index.js';
import { createAgentsAdapter } from '../../adapters/openai-agents/index.js';
import { referencedArtifacts } from '../../src/receipts/index.js';
import { createTerminator } from '../../src/runtime/index.js';
import type { Terminator } from '../../src/runtime/types.js';
import {
  anthropicReply,
  chatReply,
  startScriptedServer,
  type ScriptedServer,
} from '../adapters/support/scripted-http-server.js';

const PYTEST = readFileSync(new URL('../fixtures/readme-setups/pytest-30k.txt', import.meta.url), 'utf8');
const FAILURE_LINES = PYTEST.split('\n').filter((l) => /^(FAILED |E {2}|\S+\.py:\d+: \w+|=+ .*failed)/.test(l));
const COMMAND = { command: 'python -m pytest -v tests' };

let dir: string | undefined;
let terminator: Terminator | undefined;
let server: ScriptedServer | undefined;
afterEach(async () => {
  await server?.close();
  await terminator?.close();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  server = terminator = dir = undefined;
});

async function real(): Promise<Terminator> {
  dir = mkdtempSync(join(tmpdir(), 'tt-first-view-'));
  terminator = await createTerminator({ overrides: { dbPath: join(dir, 'vault.sqlite3') } });
  return terminator;
}

/** The first view keeps every failure line, is smaller, and its artifact recovers the run exactly. */
async function expectFaithfulView(t: Terminator, view: string, sessionId: string): Promise<void> {
  expect(view.length).toBeLessThan(PYTEST.length);
  expect(FAILURE_LINES.length).toBeGreaterThan(20);
  for (const line of FAILURE_LINES) expect(view).toContain(line);
  const [id] = referencedArtifacts(view);
  expect(id).toBeDefined();
  let recovered = '';
  let offset: number | null = 0;
  while (offset !== null) {
    const page = JSON.parse(
      await t.recoveryTool.handle({ action: 'artifact_get', artifact_id: id, offset, limit: 20_000 }, { sessionId }),
    ) as { content: string; next_offset: number | null };
    recovered += page.content;
    offset = page.next_offset;
  }
  expect(recovered).toBe(PYTEST);
}

const chatBody = [
  { role: 'user', content: 'Why does the parser test fail?' },
  {
    role: 'assistant',
    content: null,
    tool_calls: [{ id: 'c1', type: 'function', function: { name: 'bash', arguments: JSON.stringify(COMMAND) } }],
  },
  { role: 'tool', tool_call_id: 'c1', content: PYTEST },
];

describe('a tool output at first sight, in the README setups', () => {
  it('wrapOpenAI: the model sees a faithful smaller view and is offered recovery; the loop’s transcript keeps the original', async () => {
    const t = await real();
    server = await startScriptedServer([() => chatReply({ content: 'done' }), () => chatReply({ content: 'again' })]);
    const openai = wrapOpenAI(new OpenAI({ apiKey: 'k', baseURL: `${server.url}/v1`, maxRetries: 0 }), t, {
      sessionId: 'run-42',
      handleRecovery: true,
    });
    const messages = structuredClone(chatBody);
    await openai.chat.completions.create({ model: 'o3', messages: messages as never });
    await openai.chat.completions.create({
      model: 'o3',
      messages: [...messages, { role: 'user', content: 'and?' }] as never,
    });
    expect(messages).toEqual(chatBody);
    const [first, second] = server.requests.map((r) => r.body['messages'] as { role: string; content: string }[]);
    const view = first!.find((m) => m.role === 'tool')!.content;
    await expectFaithfulView(t, view, 'run-42');
    expect(second!.find((m) => m.role === 'tool')).toBeDefined();
    const tools = server.requests[0]!.body['tools'] as { function: { name: string } }[];
    expect(tools.map((x) => x.function.name)).toContain('token_terminator');
  });

  it('wrapOpenAI with reduceToolOutputs: false sends the output whole', async () => {
    const t = await real();
    server = await startScriptedServer([() => chatReply({ content: 'done' })]);
    const openai = wrapOpenAI(new OpenAI({ apiKey: 'k', baseURL: `${server.url}/v1`, maxRetries: 0 }), t, {
      sessionId: 'run-43',
      reduceToolOutputs: false,
    });
    await openai.chat.completions.create({ model: 'o3', messages: structuredClone(chatBody) as never });
    const sent = server.requests[0]!.body['messages'] as { role: string; content: string }[];
    expect(sent.find((m) => m.role === 'tool')!.content).toBe(PYTEST);
  });

  it('wrapAnthropic: the tool_result the model sees is a faithful smaller view', async () => {
    const t = await real();
    server = await startScriptedServer([() => anthropicReply([{ type: 'text', text: 'done' }])]);
    const anthropic = wrapAnthropic(new Anthropic({ apiKey: 'k', baseURL: server.url, maxRetries: 0 }), t, {
      sessionId: 'run-44',
      handleRecovery: true,
    });
    await anthropic.messages.create({
      model: 'claude-sonnet-4-5',
      max_tokens: 1024,
      messages: [
        { role: 'user', content: 'Why does the parser test fail?' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'bash', input: COMMAND }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: PYTEST }] },
      ],
    });
    const sent = server.requests[0]!.body['messages'] as { content: { type: string; content?: string }[] | string }[];
    const result = (sent[2]!.content as { type: string; content?: string }[])[0]!;
    expect(result.type).toBe('tool_result');
    await expectFaithfulView(t, String(result.content), 'run-44');
  });

  it('Agents JS runOptions(): the filtered model input shows a faithful smaller view, the run’s items stay whole', async () => {
    const t = await real();
    const tt = createAgentsAdapter(t);
    const input = [
      { role: 'user', content: 'Why does the parser test fail?' },
      { type: 'function_call', callId: 'c1', name: 'bash', arguments: JSON.stringify(COMMAND), status: 'completed' },
      {
        type: 'function_call_result',
        callId: 'c1',
        name: 'bash',
        status: 'completed',
        output: { type: 'text', text: PYTEST },
      },
    ] as unknown as AgentInputItem[];
    const before = structuredClone(input);
    const filter = tt.runOptions().callModelInputFilter;
    const out = await filter({
      modelData: { input, instructions: 'You fix tests.' },
      agent: { model: 'gpt-4.1' },
      context: { sessionId: 'session-1' },
    } as never);
    expect(input).toEqual(before);
    const result = out.input.find((i) => (i as { type?: string }).type === 'function_call_result') as unknown as {
      output: { text: string };
    };
    await expectFaithfulView(t, result.output.text, 'session-1');
    const off = createAgentsAdapter(t, { reduceToolOutputs: false }).runOptions().callModelInputFilter;
    const whole = await off({
      modelData: { input, instructions: 'You fix tests.' },
      agent: { model: 'gpt-4.1' },
      context: { sessionId: 'session-2' },
    } as never);
    const kept = whole.input.find((i) => (i as { type?: string }).type === 'function_call_result') as unknown as {
      output: { text: string };
    };
    expect(kept.output.text).toBe(PYTEST);
  });
});
