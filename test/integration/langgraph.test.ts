import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MemorySaver } from '@langchain/langgraph';
import { createReactAgent } from '@langchain/langgraph/prebuilt';
import { createAgent, tool, ToolMessage, type BaseMessage } from 'langchain';
import { describe, expect, it } from 'vitest';
import { createReactAgentHooks, tokenTerminatorMiddleware } from '../../adapters/langgraph/index.js';
import { createTerminator } from '../../src/index.js';
import { isReceipt, parseReceipt } from '../../src/receipts/index.js';
import { createFakeTerminator } from '../adapters/support/fake-terminator.js';
import { ScriptedChatModel, type ScriptedCall, type ScriptStep } from '../adapters/support/scripted-chat-model.js';

const BIG = Array.from({ length: 400 }, (_, i) => `line ${i}: ${'evidence '.repeat(3)}é`).join('\n');
const bigTool = tool(async () => BIG, {
  name: 'search_logs',
  description: 'search the logs',
  schema: { type: 'object', properties: {} } as never,
});

/** Find the receipt in the last tool message and ask for the exact content back. */
const recoverFromReceipt: ScriptStep = (messages) => {
  const last = messages.at(-1)!;
  const receipt = parseReceipt(String(last.content));
  return {
    tool_calls: [
      {
        id: 'c2',
        name: 'token_terminator',
        args: {
          action: 'artifact_get',
          artifact_id: receipt?.artifactId ?? 'none',
          limit: 20000,
          session_id: 'spoofed',
        },
      },
    ],
  };
};

function script(): ScriptStep[] {
  return [
    () => ({ tool_calls: [{ id: 'c1', name: 'search_logs', args: {} }] }),
    recoverFromReceipt,
    () => ({ content: 'final answer' }),
  ];
}

const toolMessages = (messages: readonly BaseMessage[]): ToolMessage[] =>
  messages.filter((m): m is ToolMessage => ToolMessage.isInstance(m));

describe('LangChain createAgent middleware', () => {
  it('shows the model a receipt, recovers the exact content, keeps the original in state and caps the output', async () => {
    const terminator = createFakeTerminator();
    const log: ScriptedCall[] = [];
    const model = new ScriptedChatModel({ script: script(), log, cursor: { i: 0 } });
    const agent = createAgent({
      model,
      tools: [bigTool],
      middleware: [tokenTerminatorMiddleware(terminator, { route: { contextWindow: 32_000 } })],
      checkpointer: new MemorySaver(),
    });
    const result = await agent.invoke(
      { messages: [{ role: 'user', content: 'find the error' }] },
      { configurable: { thread_id: 'thread-1' } },
    );

    const seen = log[1]!.messages.find((m) => m.type === 'tool')!;
    expect(isReceipt(seen.content)).toBe(true);
    expect(log[1]!.messages.some((m) => m.content.includes('line 399'))).toBe(false);

    const [original, recovered] = toolMessages(result.messages);
    expect(original!.content).toBe(BIG);
    const page = JSON.parse(String(recovered!.content)) as { content: string; next_offset: number | null };
    expect(page.content).toBe(BIG);
    expect(page.next_offset).toBeNull();

    for (const call of log) expect(call.maxTokens).toBeGreaterThan(0);
    expect(log[0]!.maxTokens).toBeLessThan(32_000);
    // Every model call that sees a receipt is offered the recovery tool.
    for (const call of log)
      if (call.messages.some((m) => m.content.includes('Token Terminator')))
        expect(call.tools).toContain('token_terminator');
    expect(model.maxTokens).toBeUndefined();
    expect(terminator.calls.every((c) => c.context.sessionId === 'thread-1')).toBe(true);
  });

  it('in pass-through mode (no usable vault) offers no recovery tool, since nothing can be recovered, and keeps the output cap', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tt-lg-passthrough-'));
    writeFileSync(join(dir, 'a-file'), 'x');
    const stderr = process.stderr.write;
    process.stderr.write = () => true; // its one pass-through warning
    try {
      await using terminator = await createTerminator({
        env: {},
        overrides: { dbPath: join(dir, 'a-file', 'v.sqlite3') },
      });
      process.stderr.write = stderr;
      expect(terminator.passThrough).toBe(true);
      const log: ScriptedCall[] = [];
      const model = new ScriptedChatModel({
        script: [() => ({ tool_calls: [{ id: 'c1', name: 'search_logs', args: {} }] }), () => ({ content: 'done' })],
        log,
        cursor: { i: 0 },
      });
      const agent = createAgent({
        model,
        tools: [bigTool],
        middleware: [tokenTerminatorMiddleware(terminator, { route: { contextWindow: 32_000 } })],
      });
      await agent.invoke(
        { messages: [{ role: 'user', content: 'find the error' }] },
        { configurable: { thread_id: 't' } },
      );
      expect(log).toHaveLength(2);
      for (const call of log) {
        expect(call.tools).not.toContain('token_terminator');
        expect(call.maxTokens).toBeGreaterThan(0);
        expect(call.maxTokens).toBeLessThan(32_000);
      }
      // The tool output reached the model whole: nothing was stored that a receipt could name.
      expect(log[1]!.messages.some((m) => m.content.includes('line 399'))).toBe(true);
    } finally {
      process.stderr.write = stderr;
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('reduces at source through the tool stream and keeps the original in the ToolMessage artifact', async () => {
    const terminator = createFakeTerminator({ toolStreamNames: ['search_logs'] });
    const log: ScriptedCall[] = [];
    const model = new ScriptedChatModel({ script: script(), log, cursor: { i: 0 } });
    const agent = createAgent({ model, tools: [bigTool], middleware: [tokenTerminatorMiddleware(terminator)] });
    const result = await agent.invoke({ messages: [{ role: 'user', content: 'go' }] });
    const [reduced, recovered] = toolMessages(result.messages);
    expect(isReceipt(String(reduced!.content))).toBe(true);
    expect((reduced!.artifact as { token_terminator: { original: string } }).token_terminator.original).toBe(BIG);
    expect((JSON.parse(String(recovered!.content)) as { content: string }).content).toBe(BIG);
  });

  it('keeps the agent working with the original content when the pipeline fails', async () => {
    const terminator = createFakeTerminator({ fail: true, toolStreamNames: ['search_logs'] });
    const log: ScriptedCall[] = [];
    const model = new ScriptedChatModel({
      script: [() => ({ tool_calls: [{ id: 'c1', name: 'search_logs', args: {} }] }), () => ({ content: 'ok' })],
      log,
      cursor: { i: 0 },
    });
    const agent = createAgent({
      model,
      tools: [bigTool],
      middleware: [tokenTerminatorMiddleware(terminator, { route: { contextWindow: 32_000 } })],
    });
    const result = await agent.invoke({ messages: [{ role: 'user', content: 'go' }] });
    expect(log[1]!.messages.find((m) => m.type === 'tool')!.content).toBe(BIG);
    expect(toolMessages(result.messages)[0]!.content).toBe(BIG);
    expect(result.messages.at(-1)!.content).toBe('ok');
    expect(terminator.calls.length).toBeGreaterThan(0);
  });

  it('cancels the in-flight compile when the run is aborted', async () => {
    const terminator = createFakeTerminator({ hangCompile: true });
    const model = new ScriptedChatModel({ script: script(), log: [] });
    const agent = createAgent({ model, tools: [bigTool], middleware: [tokenTerminatorMiddleware(terminator)] });
    const controller = new AbortController();
    const run = agent.invoke({ messages: [{ role: 'user', content: 'go' }] }, { signal: controller.signal });
    await expect.poll(() => terminator.calls.length).toBeGreaterThan(0);
    controller.abort();
    await expect(run).rejects.toThrow();
    expect(terminator.calls[0]!.signal?.aborted).toBe(true);
  });
});

describe('LangGraph createReactAgent (legacy) hooks', () => {
  it('feeds the model compiled llmInputMessages, keeps state messages original and caps the model', async () => {
    const terminator = createFakeTerminator();
    const log: ScriptedCall[] = [];
    const model = new ScriptedChatModel({ script: script(), log, cursor: { i: 0 } });
    const tt = createReactAgentHooks(terminator, { model, route: { contextWindow: 32_000 } });
    const tools = [bigTool, tt.recoveryTool];
    const agent = createReactAgent({
      llm: tt.llm(model, tools),
      tools: tt.toolNode(tools),
      preModelHook: tt.preModelHook,
      checkpointer: new MemorySaver(),
    });
    const result = await agent.invoke(
      { messages: [{ role: 'user', content: 'go' }] },
      { configurable: { thread_id: 'legacy-1' } },
    );

    expect(isReceipt(log[1]!.messages.find((m) => m.type === 'tool')!.content)).toBe(true);
    const [original, recovered] = toolMessages(result.messages);
    expect(original!.content).toBe(BIG);
    expect((JSON.parse(String(recovered!.content)) as { content: string }).content).toBe(BIG);
    expect(log[1]!.maxTokens).toBeGreaterThan(0);
    expect(log[1]!.maxTokens).toBeLessThan(32_000);
    expect(terminator.calls.every((c) => c.context.sessionId === 'legacy-1')).toBe(true);
  });

  it('binds the recovery tool (last) and runs it even when the caller did not list it', async () => {
    const terminator = createFakeTerminator();
    const log: ScriptedCall[] = [];
    const model = new ScriptedChatModel({ script: script(), log, cursor: { i: 0 } });
    const tt = createReactAgentHooks(terminator, { model });
    const agent = createReactAgent({
      llm: tt.llm(model, [bigTool]),
      tools: tt.toolNode([bigTool]),
      preModelHook: tt.preModelHook,
    });
    const result = await agent.invoke(
      { messages: [{ role: 'user', content: 'go' }] },
      { configurable: { thread_id: 'legacy-2' } },
    );
    expect(log.map((c) => c.tools)).toEqual([
      ['search_logs', 'token_terminator'],
      ['search_logs', 'token_terminator'],
      ['search_logs', 'token_terminator'],
    ]);
    const [, recovered] = toolMessages(result.messages);
    expect((JSON.parse(String(recovered!.content)) as { content: string }).content).toBe(BIG);
    expect(result.messages.at(-1)!.content).toBe('final answer');
  });

  it('reduces tool results in the ToolNode subclass and keeps the original in the artifact', async () => {
    const terminator = createFakeTerminator({ toolStreamNames: ['search_logs'] });
    const model = new ScriptedChatModel({ script: script(), log: [], cursor: { i: 0 } });
    const tt = createReactAgentHooks(terminator, { model });
    const tools = [bigTool, tt.recoveryTool];
    const agent = createReactAgent({ llm: model, tools: tt.toolNode(tools), preModelHook: tt.preModelHook });
    const result = await agent.invoke({ messages: [{ role: 'user', content: 'go' }] });
    const [reduced, recovered] = toolMessages(result.messages);
    expect(isReceipt(String(reduced!.content))).toBe(true);
    expect((reduced!.artifact as { token_terminator: { original: string } }).token_terminator.original).toBe(BIG);
    expect((JSON.parse(String(recovered!.content)) as { content: string }).content).toBe(BIG);
  });
});
