/**
 * One accounting for every host: after each README setup (LangChain middleware, Agents JS,
 * `wrapOpenAI`, `wrapAnthropic`) runs a conversation against a scripted model on loopback whose
 * `bash` call returns a 30 kB failing pytest run, `stats --json` and the report read from the
 * vault show a saving equal to the characters and tokens the model did not get (each request the
 * model received, against the same request with the run whole and without our recovery tool),
 * within 1 %, credited to the stage that made it (compressToolResult), in every request that
 * carried the reduced run, and never for a rendering the model did not get (a repeated run's delta
 * that a request stage replaced by the run's first view).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { MemorySaver } from '@langchain/langgraph';
import { ChatOpenAI } from '@langchain/openai';
import { Agent, OpenAIProvider, Runner, setTracingDisabled, tool as agentsTool } from '@openai/agents';
import { createAgent, tool } from 'langchain';
import OpenAI from 'openai';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { wrapAnthropic, wrapOpenAI } from '../../adapters/custom-loop/index.js';
import { tokenTerminatorMiddleware } from '../../adapters/langgraph/index.js';
import { createAgentsAdapter } from '../../adapters/openai-agents/index.js';
import { run } from '../../src/cli/program.js';
import { canonicalJson, codePoints, createTiktokenCounter } from '../../src/measure/index.js';
import { referencedArtifacts } from '../../src/receipts/index.js';
import { readVaultFigures } from '../../src/report/from-vault.js';
import { savedByStage } from '../../src/report/figures.js';
import { createTerminator } from '../../src/runtime/index.js';
import type { Terminator } from '../../src/runtime/types.js';
import {
  anthropicReply,
  chatReply,
  chatToolCall,
  responsesReply,
  startScriptedServer,
  type ScriptedServer,
} from '../adapters/support/scripted-http-server.js';

const PYTEST = readFileSync(new URL('../fixtures/readme-setups/pytest-30k.txt', import.meta.url), 'utf8');
const COMMAND = { command: 'python -m pytest -v tests' };
const counter = createTiktokenCounter();

beforeAll(() => setTracingDisabled(true));

let dir: string | undefined;
let terminator: Terminator | undefined;
let server: ScriptedServer | undefined;
afterEach(async () => {
  await server?.close();
  await terminator?.close();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  server = terminator = dir = undefined;
  vi.unstubAllEnvs();
});

async function real(): Promise<{ t: Terminator; db: string }> {
  dir = mkdtempSync(join(tmpdir(), 'tt-accounting-'));
  const db = join(dir, 'vault.sqlite3');
  terminator = await createTerminator({ overrides: { dbPath: db } });
  return { t: terminator, db };
}

/** The body with every reduced tool output whole again and without the recovery tool: what the host would have sent. */
function rawOf(body: unknown): unknown {
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return referencedArtifacts(v).length > 0 ? PYTEST : v;
    if (Array.isArray(v)) return v.map(walk);
    if (typeof v !== 'object' || v === null) return v;
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) {
      if (k === 'tools' && Array.isArray(x)) {
        const kept = x.filter((t) => !JSON.stringify(t).includes('"token_terminator"'));
        if (kept.length > 0) out[k] = walk(kept);
        continue;
      }
      out[k] = walk(x);
    }
    return out;
  };
  return walk(body);
}

const size = (v: unknown): { chars: number; tokens: number } => {
  const json = canonicalJson(v);
  return { chars: codePoints(json), tokens: counter.count(json) };
};

/** What the model did not get, over every request it received; and the part the reduced run made. */
function truth(requests: ScriptedServer['requests']): {
  chars: number;
  tokens: number;
  runChars: number;
  views: number;
} {
  let chars = 0;
  let tokens = 0;
  let runChars = 0;
  let views = 0;
  const runJson = codePoints(canonicalJson(PYTEST));
  for (const { body } of requests) {
    const raw = size(rawOf(body));
    const sent = size(body);
    chars += raw.chars - sent.chars;
    tokens += raw.tokens - sent.tokens;
    const walk = (v: unknown): void => {
      if (typeof v === 'string' && referencedArtifacts(v).length > 0) {
        runChars += runJson - codePoints(canonicalJson(v));
        views++;
      } else if (Array.isArray(v)) v.forEach(walk);
      else if (typeof v === 'object' && v !== null) Object.values(v).forEach(walk);
    };
    walk(body);
  }
  return { chars, tokens, runChars, views };
}

interface Stats {
  raw_chars: number;
  final_chars: number;
  raw_tokens: number;
  final_tokens: number;
  saved_by_stage: Record<string, number>;
}

async function statsJson(db: string): Promise<Stats> {
  const out: string[] = [];
  const spy = vi.spyOn(process.stdout, 'write').mockImplementation(((chunk: string | Uint8Array) => {
    out.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
    return true;
  }) as typeof process.stdout.write);
  try {
    expect(await run(['stats', '--json', '--db', db])).toBe(0);
  } finally {
    spy.mockRestore();
  }
  return JSON.parse(out.join('')) as Stats;
}

const within1pct = (actual: number, expected: number, what: string): void => {
  expect(expected, what).toBeGreaterThan(0);
  expect(Math.abs(actual - expected) / expected, `${what}: ${actual} vs ${expected}`).toBeLessThanOrEqual(0.01);
};

/** stats --json and the report agree with what the model did not get, credited to compressToolResult. */
async function expectAccounted(t: Terminator, db: string, requests: ScriptedServer['requests']): Promise<void> {
  await t.close();
  const want = truth(requests);
  expect(want.views, 'requests that showed the reduced run').toBeGreaterThanOrEqual(2);
  const stats = await statsJson(db);
  within1pct(stats.raw_chars - stats.final_chars, want.chars, 'stats chars saved');
  within1pct(stats.raw_tokens - stats.final_tokens, want.tokens, 'stats tokens saved');
  within1pct(stats.saved_by_stage['compressToolResult'] ?? 0, want.runChars, 'stats compressToolResult credit');
  expect(stats.saved_by_stage['deltaRepeatedOutput'] ?? 0).toBe(0);
  const report = readVaultFigures(db);
  within1pct(report.raw_chars! - report.final_chars!, want.chars, 'report chars saved');
  within1pct(report.raw_tokens - report.final_tokens, want.tokens, 'report tokens saved');
  within1pct(savedByStage(report)?.['compressToolResult'] ?? 0, want.runChars, 'report compressToolResult credit');
}

describe('stats and report count what the model did not get, for every in-process host', () => {
  it('LangChain createAgent + tokenTerminatorMiddleware', async () => {
    const { t, db } = await real();
    server = await startScriptedServer([
      () => chatToolCall('c1', 'bash', COMMAND),
      () => chatReply({ content: 'the parser test fails' }),
      () => chatReply({ content: 'again' }),
    ]);
    const bash = tool(() => PYTEST, {
      name: 'bash',
      description: 'Run a shell command',
      schema: z.object({ command: z.string() }),
    });
    const agent = createAgent({
      model: new ChatOpenAI({
        model: 'gpt-4o',
        apiKey: 'k',
        maxRetries: 0,
        configuration: { baseURL: `${server.url}/v1` },
      }),
      tools: [bash],
      middleware: [tokenTerminatorMiddleware(t)],
      // The thread's history carries into the second turn, which shows the reduced run again.
      checkpointer: new MemorySaver(),
    });
    const config = { configurable: { thread_id: 'session-1' } };
    await agent.invoke({ messages: [{ role: 'user', content: 'Why does the parser test fail?' }] }, config);
    await agent.invoke({ messages: [{ role: 'user', content: 'and?' }] }, config);
    expect(server.requests).toHaveLength(3);
    await expectAccounted(t, db, server.requests);
  });

  it('OpenAI Agents JS Runner + createAgentsAdapter', async () => {
    const { t, db } = await real();
    server = await startScriptedServer([
      () =>
        responsesReply([
          {
            type: 'function_call',
            id: 'fc1',
            call_id: 'c1',
            name: 'bash',
            arguments: JSON.stringify(COMMAND),
            status: 'completed',
          },
        ]),
      () =>
        responsesReply([
          {
            type: 'message',
            id: 'm1',
            role: 'assistant',
            status: 'completed',
            content: [{ type: 'output_text', text: 'the parser test fails', annotations: [] }],
          },
        ]),
    ]);
    const bash = agentsTool({
      name: 'bash',
      description: 'Run a shell command',
      parameters: z.object({ command: z.string() }),
      execute: () => PYTEST,
    });
    const tt = createAgentsAdapter(t);
    const openAIClient = new OpenAI({ apiKey: 'k', baseURL: `${server.url}/v1`, maxRetries: 0 });
    const runner = new Runner({ modelProvider: tt.wrapModelProvider(new OpenAIProvider({ openAIClient })) });
    const agent = new Agent({ name: 'assistant', model: 'gpt-4.1', tools: [bash, tt.recoveryTool] });
    const result = await runner.run(agent, 'Why does the parser test fail?', {
      context: { sessionId: 'session-1' },
      ...tt.runOptions(),
    });
    expect(result.finalOutput).toBe('the parser test fails');
    expect(server.requests).toHaveLength(2);
    // One request carries the reduced run: the saving is that one request's.
    await t.close();
    const want = truth(server.requests);
    expect(want.views).toBe(1);
    const stats = await statsJson(db);
    within1pct(stats.raw_chars - stats.final_chars, want.chars, 'stats chars saved');
    within1pct(stats.raw_tokens - stats.final_tokens, want.tokens, 'stats tokens saved');
    within1pct(stats.saved_by_stage['compressToolResult'] ?? 0, want.runChars, 'stats compressToolResult credit');
    const report = readVaultFigures(db);
    within1pct(report.raw_tokens - report.final_tokens, want.tokens, 'report tokens saved');
    within1pct(savedByStage(report)?.['compressToolResult'] ?? 0, want.runChars, 'report compressToolResult credit');
  });

  it('wrapOpenAI hand-written loop', async () => {
    const { t, db } = await real();
    server = await startScriptedServer([
      () => chatToolCall('c1', 'bash', COMMAND),
      () => chatReply({ content: 'the parser test fails' }),
      () => chatReply({ content: 'again' }),
    ]);
    const openai = wrapOpenAI(new OpenAI({ apiKey: 'k', baseURL: `${server.url}/v1`, maxRetries: 0 }), t, {
      sessionId: 'run-42',
      handleRecovery: true,
    });
    const tools = [
      {
        type: 'function' as const,
        function: {
          name: 'bash',
          description: 'Run a shell command',
          parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
        },
      },
    ];
    const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [
      { role: 'user', content: 'Why does the parser test fail?' },
    ];
    for (;;) {
      const message = (await openai.chat.completions.create({ model: 'o3', messages, tools })).choices[0]!.message;
      messages.push(message);
      if (!message.tool_calls?.length) break;
      for (const call of message.tool_calls) messages.push({ role: 'tool', tool_call_id: call.id, content: PYTEST });
    }
    messages.push({ role: 'user', content: 'and?' });
    await openai.chat.completions.create({ model: 'o3', messages, tools });
    expect(server.requests).toHaveLength(3);
    await expectAccounted(t, db, server.requests);
  });

  it('wrapAnthropic hand-written loop', async () => {
    const { t, db } = await real();
    server = await startScriptedServer([
      () => anthropicReply([{ type: 'tool_use', id: 't1', name: 'bash', input: COMMAND }], 'tool_use'),
      () => anthropicReply([{ type: 'text', text: 'the parser test fails' }]),
      () => anthropicReply([{ type: 'text', text: 'again' }]),
    ]);
    const anthropic = wrapAnthropic(new Anthropic({ apiKey: 'k', baseURL: server.url, maxRetries: 0 }), t, {
      sessionId: 'run-43',
      handleRecovery: true,
    });
    const tools: Anthropic.Tool[] = [
      {
        name: 'bash',
        description: 'Run a shell command',
        input_schema: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
      },
    ];
    const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'Why does the parser test fail?' }];
    for (;;) {
      const message = await anthropic.messages.create({
        model: 'claude-sonnet-4-5',
        max_tokens: 16_384,
        messages,
        tools,
      });
      messages.push({ role: 'assistant', content: message.content });
      const calls = message.content.filter((b): b is Anthropic.ToolUseBlock => b.type === 'tool_use');
      if (calls.length === 0) break;
      messages.push({
        role: 'user',
        content: calls.map((call) => ({ type: 'tool_result' as const, tool_use_id: call.id, content: PYTEST })),
      });
    }
    messages.push({ role: 'user', content: 'and?' });
    await anthropic.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 16_384, messages, tools });
    expect(server.requests).toHaveLength(3);
    await expectAccounted(t, db, server.requests);
  });
  it('wrapOpenAI: a repeated run whose delta a request stage showed as its first view credits deltaRepeatedOutput with nothing', async () => {
    const { t, db } = await real();
    server = await startScriptedServer([
      () => chatToolCall('c1', 'bash', COMMAND),
      () => chatToolCall('c2', 'bash', COMMAND),
      () => chatReply({ content: 'the parser test fails' }),
    ]);
    const openai = wrapOpenAI(new OpenAI({ apiKey: 'k', baseURL: `${server.url}/v1`, maxRetries: 0 }), t, {
      sessionId: 'run-44',
      handleRecovery: true,
    });
    const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [
      { role: 'user', content: 'Why does the parser test fail?' },
    ];
    for (;;) {
      const message = (await openai.chat.completions.create({ model: 'o3', messages })).choices[0]!.message;
      messages.push(message);
      if (!message.tool_calls?.length) break;
      for (const call of message.tool_calls) messages.push({ role: 'tool', tool_call_id: call.id, content: PYTEST });
    }
    expect(server.requests).toHaveLength(3);
    await t.close();
    // The second run became a delta of the first ("no output change"), whose base the request did
    // not show whole: the request stages showed the run's first view, so the delta saved nothing
    // and the view's saving is compressToolResult's.
    const last = (server.requests[2]!.body['messages'] as { role: string; content: string }[]).filter(
      (m) => m.role === 'tool',
    );
    expect(last[1]!.content).not.toContain('temporal delta');
    expect(last[1]!.content.length).toBeLessThan(PYTEST.length / 2);
    expect(referencedArtifacts(last[1]!.content).length).toBeGreaterThan(0);
    const want = truth(server.requests);
    const stats = await statsJson(db);
    within1pct(stats.raw_chars - stats.final_chars, want.chars, 'stats chars saved');
    within1pct(stats.raw_tokens - stats.final_tokens, want.tokens, 'stats tokens saved');
    within1pct(stats.saved_by_stage['compressToolResult'] ?? 0, want.runChars, 'stats compressToolResult credit');
    expect(stats.saved_by_stage['deltaRepeatedOutput'] ?? 0).toBe(0);
  });
});
