/**
 * The adapters against the real createTerminator (SQLite vault in a temp dir): the output cap
 * reaches the model, recovery returns exact vaulted content, and a broken pipeline (closed vault,
 * throwing counter) leaves every agent run working with the original content.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, run, setTracingDisabled, tool as agentsTool } from '@openai/agents';
import { createAgent, tool, ToolMessage } from 'langchain';
import OpenAI from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { wrapOpenAI } from '../../adapters/custom-loop/index.js';
import { tokenTerminatorMiddleware } from '../../adapters/langgraph/index.js';
import { createAgentsAdapter } from '../../adapters/openai-agents/index.js';
import { createTiktokenCounter } from '../../src/measure/index.js';
import type { TokenCounter } from '../../src/measure/types.js';
import { createTerminator } from '../../src/runtime/index.js';
import type { Terminator } from '../../src/runtime/types.js';
import { callTool, say, ScriptedAgentsModel } from '../adapters/support/scripted-agents-model.js';
import { ScriptedChatModel, type ScriptedCall } from '../adapters/support/scripted-chat-model.js';
import { chatReply, startScriptedServer, type ScriptedServer } from '../adapters/support/scripted-http-server.js';

const BIG = Array.from({ length: 400 }, (_, i) => `match ${i}: ${'token '.repeat(5)}`).join('\n');
const WINDOW = 64_000;
const throwingCounter: TokenCounter = {
  name: 'broken',
  exact: true,
  count: () => {
    throw new Error('counter exploded');
  },
};

let dir: string;
// One tiktoken encoder for the file (building one per test dominates the run time).
let sharedCounter: TokenCounter;
let terminator: Terminator | undefined;
let server: ScriptedServer | undefined;
beforeAll(() => {
  setTracingDisabled(true);
  sharedCounter = createTiktokenCounter('o200k_base');
});
afterAll(() => sharedCounter.dispose?.());
afterEach(async () => {
  await terminator?.close().catch(() => undefined);
  await server?.close();
  terminator = undefined;
  server = undefined;
  rmSync(dir, { recursive: true, force: true });
});

async function real(fault?: 'vault-closed' | 'counter-throws'): Promise<Terminator> {
  dir = mkdtempSync(join(tmpdir(), 'tt-adapters-'));
  const t = await createTerminator({
    overrides: { dbPath: join(dir, 'vault.sqlite3') },
    counter: fault === 'counter-throws' ? throwingCounter : sharedCounter,
  });
  if (fault === 'vault-closed') await t.vault.close();
  terminator = t;
  return t;
}

const lcTool = tool(async () => BIG, {
  name: 'search_files',
  description: 'search',
  schema: { type: 'object', properties: {} } as never,
});

/** One LangChain agent run over `model` with the search tool and the middleware on `t`, in thread `thread`. */
async function runAgent(t: Terminator, model: ScriptedChatModel, thread: string) {
  const agent = createAgent({
    model,
    tools: [lcTool],
    middleware: [tokenTerminatorMiddleware(t, { route: { model: 'gpt-4o', contextWindow: WINDOW } })],
  });
  return agent.invoke({ messages: [{ role: 'user', content: 'go' }] }, { configurable: { thread_id: thread } });
}

describe('LangChain middleware with createTerminator', () => {
  it('caps the model and recovers exact vaulted content through the recovery tool', async () => {
    const t = await real();
    const { artifactId } = await t.vault.put({ content: BIG, toolName: 'search_files', sessionId: 'real-1' });
    const log: ScriptedCall[] = [];
    const model = new ScriptedChatModel({
      script: [
        () => ({
          tool_calls: [
            {
              id: 'r1',
              name: 'token_terminator',
              args: { action: 'artifact_get', artifact_id: artifactId, limit: 20000 },
            },
          ],
        }),
        () => ({ content: 'ok' }),
      ],
      log,
      cursor: { i: 0 },
    });
    const result = await runAgent(t, model, 'real-1');
    const recovered = result.messages.find((m) => ToolMessage.isInstance(m))!;
    expect((JSON.parse(String(recovered.content)) as { content: string }).content).toBe(BIG);
    for (const call of log) {
      expect(call.maxTokens).toBeGreaterThan(0);
      expect(call.maxTokens).toBeLessThan(WINDOW);
    }
  });

  it.each(['vault-closed', 'counter-throws'] as const)(
    'keeps the run working with the original content when %s',
    async (fault) => {
      const t = await real(fault);
      const log: ScriptedCall[] = [];
      const model = new ScriptedChatModel({
        script: [() => ({ tool_calls: [{ id: 'c1', name: 'search_files', args: {} }] }), () => ({ content: 'ok' })],
        log,
        cursor: { i: 0 },
      });
      const result = await runAgent(t, model, 'broken');
      expect(log[1]!.messages.find((m) => m.type === 'tool')!.content).toBe(BIG);
      expect(result.messages.at(-1)!.content).toBe('ok');
    },
  );
});

describe('OpenAI Agents adapter with createTerminator', () => {
  const bigTool = agentsTool({
    name: 'search_files',
    description: 's',
    parameters: { type: 'object', properties: {}, required: [], additionalProperties: true },
    strict: false,
    execute: async () => BIG,
  });

  it('caps the model through modelSettings.maxTokens', async () => {
    const t = await real();
    const tt = createAgentsAdapter(t, { route: { contextWindow: WINDOW } });
    const model = new ScriptedAgentsModel([() => say('hi')]);
    await run(new Agent({ name: 'a', model: tt.wrapModel(model) }), 'hello', {
      context: { sessionId: 'real-2' },
      ...tt.runOptions(),
    });
    expect(model.log[0]!.maxTokens).toBeGreaterThan(0);
    expect(model.log[0]!.maxTokens).toBeLessThan(WINDOW);
  });

  it.each(['vault-closed', 'counter-throws'] as const)(
    'keeps the run working with the original content when %s',
    async (fault) => {
      const t = await real(fault);
      const tt = createAgentsAdapter(t, { route: { contextWindow: WINDOW } });
      const model = new ScriptedAgentsModel([() => callTool('c1', 'search_files', {}), () => say('ok')]);
      const agent = new Agent({
        name: 'a',
        model: tt.wrapModel(model),
        tools: [tt.wrapTool(bigTool), tt.recoveryTool],
      });
      const result = await run(agent, 'go', tt.runOptions());
      expect(JSON.stringify(model.log[1]!.input)).toContain('match 399');
      expect(result.finalOutput).toBe('ok');
    },
  );
});

describe('custom loop with createTerminator', () => {
  it.each([undefined, 'vault-closed', 'counter-throws'] as const)(
    'dispatches a working request (fault: %s)',
    async (fault) => {
      const t = await real(fault);
      server = await startScriptedServer([() => chatReply({ content: 'ok' })]);
      const openai = wrapOpenAI(new OpenAI({ apiKey: 'x', baseURL: `${server.url}/v1`, maxRetries: 0 }), t, {
        route: { contextWindow: WINDOW },
      });
      const messages = [
        { role: 'user', content: 'go' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'c1', type: 'function', function: { name: 'search_files', arguments: '{}' } }],
        },
        { role: 'tool', tool_call_id: 'c1', content: BIG },
      ];
      const completion = await openai.chat.completions.create({ model: 'gpt-4o', messages: messages as never });
      expect(completion.choices[0]!.message.content).toBe('ok');
      const sent = server.requests[0]!.body;
      expect(JSON.stringify(sent)).toContain('match 399');
      if (fault === undefined) expect(sent['max_completion_tokens']).toBeGreaterThan(0);
    },
  );
});
