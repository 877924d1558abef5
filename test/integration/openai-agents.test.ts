import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, run, setTracingDisabled, tool, type AgentInputItem } from '@openai/agents';
import { beforeAll, describe, expect, it } from 'vitest';
import { createAgentsAdapter } from '../../adapters/openai-agents/index.js';
import { createTerminator } from '../../src/index.js';
import { isReceipt, parseReceipt } from '../../src/receipts/index.js';
import { createFakeTerminator } from '../adapters/support/fake-terminator.js';
import {
  callTool,
  say,
  ScriptedAgentsModel,
  untilAborted,
  type AgentsStep,
} from '../adapters/support/scripted-agents-model.js';

const BIG = Array.from({ length: 400 }, (_, i) => `row ${i}\t${'payload '.repeat(3)}ü`).join('\n');
const bigTool = tool({
  name: 'search_files',
  description: 'search',
  parameters: { type: 'object', properties: {}, required: [], additionalProperties: true },
  strict: false,
  execute: async () => BIG,
});

type Result = { type?: string; name?: string; output?: unknown };
const resultText = (item: AgentInputItem | undefined): string => {
  const out = (item as Result | undefined)?.output;
  return typeof out === 'string' ? out : String((out as { text?: unknown } | undefined)?.text);
};
const results = (items: readonly AgentInputItem[]): AgentInputItem[] =>
  items.filter((i) => (i as Result).type === 'function_call_result');

const recover: AgentsStep = (input) => {
  const receipt = parseReceipt(resultText(results(input).at(-1)));
  return callTool('c2', 'token_terminator', {
    action: 'artifact_get',
    artifact_id: receipt?.artifactId ?? 'none',
    limit: 20000,
    session_id: 'spoofed',
  });
};
const script = (): AgentsStep[] => [() => callTool('c1', 'search_files', {}), recover, () => say('final')];

beforeAll(() => setTracingDisabled(true));

describe('OpenAI Agents JS adapter', () => {
  it('shows the model a receipt, recovers the exact content, keeps the original in history and caps the output', async () => {
    const terminator = createFakeTerminator();
    const tt = createAgentsAdapter(terminator, { route: { contextWindow: 32_000 } });
    const model = new ScriptedAgentsModel(script());
    const agent = new Agent({
      name: 'a',
      instructions: 'be brief',
      model: tt.wrapModel(model),
      tools: [bigTool, tt.recoveryTool],
    });
    const result = await run(agent, 'find it', { context: { sessionId: 'sess-9' }, ...tt.runOptions() });

    expect(isReceipt(resultText(results(model.log[1]!.input)[0]))).toBe(true);
    expect(JSON.stringify(model.log[1]!.input).includes('row 399')).toBe(false);
    const [original, recovered] = results(result.history);
    expect(resultText(original)).toBe(BIG);
    expect((JSON.parse(resultText(recovered)) as { content: string }).content).toBe(BIG);
    for (const call of model.log) {
      expect(call.maxTokens).toBeGreaterThan(0);
      expect(call.maxTokens).toBeLessThan(32_000);
    }
    expect(result.finalOutput).toBe('final');
    expect(terminator.calls.every((c) => c.context.sessionId === 'sess-9')).toBe(true);
  });

  it('offers the recovery tool when a request carries a receipt and the agent lacks it, and answers the call itself', async () => {
    const terminator = createFakeTerminator();
    const tt = createAgentsAdapter(terminator);
    const model = new ScriptedAgentsModel(script());
    const agent = new Agent({ name: 'a', instructions: 'be brief', model: tt.wrapModel(model), tools: [bigTool] });
    const result = await run(agent, 'find it', { context: { sessionId: 'sess-r' }, ...tt.runOptions() });

    expect(result.finalOutput).toBe('final');
    expect(model.log.map((c) => c.tools)).toEqual([
      ['search_files'],
      ['search_files', 'token_terminator'],
      ['search_files', 'token_terminator'],
    ]);
    for (const call of model.log) {
      if (JSON.stringify(call.input).includes('Token Terminator')) expect(call.tools).toContain('token_terminator');
    }
    const answered = results(model.log[2]!.input).find((i) => (i as Result).name === 'token_terminator');
    expect((JSON.parse(resultText(answered)) as { content: string }).content).toBe(BIG);
    expect(JSON.stringify(result.history)).not.toContain('token_terminator');
  });

  it('in pass-through mode (no usable vault) sends no recovery tool, even the one the agent lists, and keeps the cap', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tt-agents-passthrough-'));
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
      const tt = createAgentsAdapter(terminator, { route: { contextWindow: 32_000 } });
      const model = new ScriptedAgentsModel([() => callTool('c1', 'search_files', {}), () => say('final')]);
      const agent = new Agent({ name: 'a', model: tt.wrapModel(model), tools: [bigTool, tt.recoveryTool] });
      const result = await run(agent, 'find it', { context: { sessionId: 'sess-p' }, ...tt.runOptions() });
      expect(result.finalOutput).toBe('final');
      expect(model.log.map((c) => c.tools)).toEqual([['search_files'], ['search_files']]);
      for (const call of model.log) expect(call.maxTokens).toBeLessThan(32_000);
      expect(JSON.stringify(model.log[1]!.input)).toContain('row 399');
    } finally {
      process.stderr.write = stderr;
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('keeps a smaller cap the agent already set', async () => {
    const terminator = createFakeTerminator();
    const tt = createAgentsAdapter(terminator, { route: { contextWindow: 32_000 } });
    const model = new ScriptedAgentsModel([() => say('hi')]);
    const agent = new Agent({ name: 'a', model: tt.wrapModel(model), modelSettings: { maxTokens: 50 } });
    await run(agent, 'hello', tt.runOptions());
    expect(model.log[0]!.maxTokens).toBe(50);
  });

  it('reduces at source through the wrapped tool', async () => {
    const terminator = createFakeTerminator({ toolStreamNames: ['search_files'] });
    const tt = createAgentsAdapter(terminator, { sessionId: 'fixed' });
    const model = new ScriptedAgentsModel(script());
    const agent = new Agent({ name: 'a', model: tt.wrapModel(model), tools: [tt.wrapTool(bigTool), tt.recoveryTool] });
    const result = await run(agent, 'go');
    const [reduced, recovered] = results(result.history);
    expect(isReceipt(resultText(reduced))).toBe(true);
    expect((JSON.parse(resultText(recovered)) as { content: string }).content).toBe(BIG);
    expect(terminator.calls.some((c) => c.kind === 'tool' && c.context.sessionId === 'fixed')).toBe(true);
  });

  it('keeps the run working with the original content when the pipeline fails', async () => {
    const terminator = createFakeTerminator({ fail: true, toolStreamNames: ['search_files'] });
    const tt = createAgentsAdapter(terminator, { route: { contextWindow: 32_000 } });
    const model = new ScriptedAgentsModel([() => callTool('c1', 'search_files', {}), () => say('ok')]);
    const agent = new Agent({ name: 'a', model: tt.wrapModel(model), tools: [tt.wrapTool(bigTool)] });
    const result = await run(agent, 'go', tt.runOptions());
    expect(resultText(results(model.log[1]!.input)[0])).toBe(BIG);
    expect(model.log[1]!.maxTokens).toBeUndefined();
    expect(result.finalOutput).toBe('ok');
    expect(terminator.calls.filter((c) => c.kind === 'tool')).toHaveLength(1);
  });

  it('aborting the run cancels the in-flight compile and the model call', async () => {
    const terminator = createFakeTerminator({ hangCompile: true });
    const tt = createAgentsAdapter(terminator);
    const model = new ScriptedAgentsModel([(_input, signal) => untilAborted(signal)]);
    const agent = new Agent({ name: 'a', model: tt.wrapModel(model) });
    const controller = new AbortController();
    const pending = run(agent, 'go', tt.runOptions({ signal: controller.signal }));
    await expect.poll(() => terminator.calls.length).toBeGreaterThan(0);
    controller.abort();
    await expect(pending).rejects.toThrow();
    expect(terminator.calls[0]!.signal?.aborted).toBe(true);
  });
});
