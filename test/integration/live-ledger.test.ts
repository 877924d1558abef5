/**
 * Live runs through the adapters write the experiment ledger (opt-out), so `compare` has data
 * without a replay: the custom-loop wrapper, the LangChain middleware and the Agents adapter.
 */
import { Agent, OpenAIProvider, Runner, setTracingDisabled } from '@openai/agents';
import { ChatOpenAI } from '@langchain/openai';
import { createAgent } from 'langchain';
import OpenAI from 'openai';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { wrapOpenAI } from '../../adapters/custom-loop/index.js';
import { tokenTerminatorMiddleware } from '../../adapters/langgraph/index.js';
import { createAgentsAdapter } from '../../adapters/openai-agents/index.js';
import { run as runCli } from '../../src/cli/program.js';
import { createTerminator } from '../../src/runtime/index.js';
import { openLedger } from '../../src/telemetry/ledger.js';
import { startLimitsServer, type LimitsServer } from '../adapters/support/limits-server.js';

let dir: string;
let server: LimitsServer;

beforeAll(async () => {
  setTracingDisabled(true);
  dir = mkdtempSync(join(tmpdir(), 'tt-live-ledger-'));
  server = await startLimitsServer();
});
afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

const openai = (): OpenAI => new OpenAI({ apiKey: 'test', baseURL: `${server.url}/v1`, maxRetries: 0 });
const BIG = Array.from({ length: 3000 }, (_, i) => `src/file${i % 30}.ts:${i}: match payload ${i}`).join('\n');

/** A three-request tool loop whose second and third requests carry a large tool output. */
async function loop(
  mode: 'native' | 'balanced' | 'off',
  sessionId: string,
  env: Record<string, string> = {},
): Promise<void> {
  await using tt = await createTerminator({
    env: { TOKEN_TERMINATOR_MODE: mode, ...env },
    overrides: { dbPath: join(dir, 'vault.sqlite3') },
  });
  const client = wrapOpenAI(openai(), tt, { sessionId });
  const messages: Record<string, unknown>[] = [{ role: 'user', content: 'find the failing call sites' }];
  for (let i = 0; i < 3; i++) {
    await client.chat.completions.create({ model: 'gpt-4o', messages: messages as never });
    messages.push({
      role: 'assistant',
      content: null,
      tool_calls: [{ id: `c${i}`, type: 'function', function: { name: 'search_files', arguments: '{}' } }],
    });
    messages.push({ role: 'tool', tool_call_id: `c${i}`, content: `${BIG}\n#${i}` });
  }
}

describe('live experiment ledger', () => {
  it('custom-loop runs under two modes compare without a replay', async () => {
    await loop('off', 'live-off');
    await loop('balanced', 'live-balanced');
    const ledgerPath = join(dir, 'experiments.sqlite3');
    expect(existsSync(ledgerPath)).toBe(true);
    const ledger = await openLedger({ path: ledgerPath });
    try {
      expect(await ledger.session('live-off')).toMatchObject({
        mode: 'off',
        initialModel: 'gpt-4o',
        turnCount: 3,
        requests: 3,
        contaminated: false,
      });
      const balanced = await ledger.session('live-balanced');
      expect(balanced).toMatchObject({ mode: 'balanced', turnCount: 3, requests: 3 });
      expect(balanced!.finalTokens).toBeLessThan(balanced!.rawTokens);
    } finally {
      await ledger.close();
    }
    const out: string[] = [];
    const spy = vi
      .spyOn(process.stdout, 'write')
      .mockImplementation(((chunk: string) => (out.push(String(chunk)), true)) as typeof process.stdout.write);
    let code: number;
    try {
      code = await runCli(['compare', 'off', 'balanced', '--ledger', ledgerPath, '--json']);
    } finally {
      spy.mockRestore();
    }
    expect(code).toBe(0);
    const comparison = JSON.parse(out.join('')) as {
      a: { sessions: number };
      b: { sessions: number };
      delta: { available: boolean; meanTotalTokens: number };
      matchedTurns: { pairs: number };
    };
    expect(comparison.a.sessions).toBe(1);
    expect(comparison.b.sessions).toBe(1);
    expect(comparison.delta.available).toBe(true);
    expect(comparison.delta.meanTotalTokens).toBeLessThan(0);
    expect(comparison.matchedTurns.pairs).toBeGreaterThan(0);
    // Content-free: no prompt or tool text in the file.
    const bytes = readFileSync(ledgerPath).toString('latin1');
    expect(bytes.includes('failing call sites')).toBe(false);
    expect(bytes.includes('match payload')).toBe(false);
  });

  it('the LangChain middleware and the Agents adapter write it too', async () => {
    await using tt = await createTerminator({ env: {}, overrides: { dbPath: join(dir, 'frameworks.sqlite3') } });
    const model = new ChatOpenAI({
      model: 'gpt-4.1',
      apiKey: 'test',
      maxRetries: 0,
      configuration: { baseURL: `${server.url}/v1` },
    });
    const agent = createAgent({ model, tools: [], middleware: [tokenTerminatorMiddleware(tt)] });
    await agent.invoke({ messages: [{ role: 'user', content: 'hi' }] }, { configurable: { thread_id: 'lg-thread' } });
    const adapter = createAgentsAdapter(tt);
    const runner = new Runner({
      modelProvider: adapter.wrapModelProvider(new OpenAIProvider({ openAIClient: openai() })),
    });
    await runner.run(new Agent({ name: 'a', model: 'gpt-4o' }), 'hello', {
      context: { sessionId: 'agents-session' },
      ...adapter.runOptions(),
    });
    await tt.close();
    const ledger = await openLedger({ path: join(dir, 'experiments.sqlite3') });
    try {
      expect(await ledger.session('lg-thread')).toMatchObject({
        mode: 'balanced',
        initialModel: 'gpt-4.1',
        turnCount: 1,
      });
      expect(await ledger.session('agents-session')).toMatchObject({
        mode: 'balanced',
        initialModel: 'gpt-4o',
        turnCount: 1,
      });
    } finally {
      await ledger.close();
    }
  });

  it('TOKEN_TERMINATOR_LEDGER=false (or ledger: false) writes nothing', async () => {
    const own = mkdtempSync(join(dir, 'optout-'));
    {
      await using tt = await createTerminator({
        env: { TOKEN_TERMINATOR_LEDGER: 'false' },
        overrides: { dbPath: join(own, 'v.sqlite3') },
      });
      await wrapOpenAI(openai(), tt, { sessionId: 'x' }).chat.completions.create({
        model: 'gpt-4o',
        messages: [{ role: 'user', content: 'hi' }],
      });
    }
    {
      await using tt = await createTerminator({
        env: {},
        overrides: { dbPath: join(own, 'w.sqlite3') },
        ledger: false,
      });
      await wrapOpenAI(openai(), tt, { sessionId: 'y' }).chat.completions.create({
        model: 'gpt-4o',
        messages: [{ role: 'user', content: 'hi' }],
      });
    }
    expect(existsSync(join(own, 'experiments.sqlite3'))).toBe(false);
  });
});
