/**
 * A session id reused by a new conversation inherits nothing (docs/fidelity.md). The README's
 * snippets use fixed ids, and the gateway gives one session to every conversation that opens with
 * the same instructions: a second conversation running the same failing command must see the first
 * view a new session sees — not a delta against the first conversation's run, not the whole output
 * because the first conversation's model once recovered it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { wrapOpenAI } from '../../adapters/custom-loop/index.js';
import { referencedArtifacts } from '../../src/receipts/index.js';
import { createTerminator } from '../../src/runtime/index.js';
import type { Terminator } from '../../src/runtime/types.js';
import { artifactIdFor } from '../../src/vault/identity.js';
import { pytestFailure } from '../fixtures/clients/pytest-output.js';
import {
  chatReply,
  chatToolCall,
  startScriptedServer,
  type ScriptedServer,
  type ServerStep,
} from '../adapters/support/scripted-http-server.js';
import { startHarness, type Harness } from '../proxy/support/harness.js';
import { chat, type Recorded } from '../proxy/support/upstream.js';

const OUTPUT = pytestFailure(); // 30 kB, one failure
const FAILURE = 'tests/test_parser.py::test_parser_rejects_trailing_comma FAILED';
const COMMAND = 'sh run-tests.sh';
const PROMPT = 'Why does the parser test fail? Run: sh run-tests.sh';
const SYSTEM = 'You are a coding agent. Use the tools.';
const TOOLS = [
  {
    type: 'function',
    function: { name: 'bash', parameters: { type: 'object', properties: { command: { type: 'string' } } } },
  },
];

type Message = { role: string; content?: unknown; tool_call_id?: string; tool_calls?: unknown[] };

/** The tool message of `callId` in a request body as it went upstream. */
function shownOutput(body: Record<string, unknown> | undefined, callId: string): string {
  const m = ((body?.['messages'] ?? []) as Message[]).find((x) => x.role === 'tool' && x.tool_call_id === callId);
  return typeof m?.content === 'string' ? m.content : '';
}

/** A conversation's messages up to and with its test run (call `callId`). */
const withRun = (callId: string): Message[] => [
  { role: 'system', content: SYSTEM },
  { role: 'user', content: PROMPT },
  {
    role: 'assistant',
    content: null,
    tool_calls: [
      { id: callId, type: 'function', function: { name: 'bash', arguments: JSON.stringify({ command: COMMAND }) } },
    ],
  },
  { role: 'tool', tool_call_id: callId, content: OUTPUT },
];

/** Every part of what the first conversation sent that the second must not carry. */
function expectNothingOfTheFirst(second: string): void {
  expect(second).not.toContain('temporal delta');
  expect(second).not.toContain('"tt-1"');
  expect(second).not.toContain('run-1');
  // The only artifact named is the second conversation's own output (content-addressed).
  for (const id of referencedArtifacts(second)) expect(id).toBe(artifactIdFor(OUTPUT));
}

describe('a reused session id, through the custom loop', () => {
  let dir: string | undefined;
  let terminator: Terminator | undefined;
  let server: ScriptedServer | undefined;
  afterEach(async () => {
    await terminator?.close();
    await server?.close();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    terminator = undefined;
    server = undefined;
    dir = undefined;
  });

  it("shows the second conversation's run as the first conversation's first view, with nothing of the first", async () => {
    dir = mkdtempSync(join(tmpdir(), 'tt-reused-'));
    terminator = await createTerminator({ env: {}, overrides: { dbPath: join(dir, 'vault.sqlite3') } });
    const recover = (body: Record<string, unknown>) => {
      const id = referencedArtifacts(shownOutput(body, 'run-1'))[0] ?? 'none';
      return chatToolCall('tt-1', 'token_terminator', { action: 'artifact_get', artifact_id: id, limit: 200_000 });
    };
    const script: ServerStep[] = [
      // First conversation: the run's view, a recovery of it (answered by the wrapper), the answer.
      recover,
      () => chatReply({ content: 'the trailing comma is accepted' }),
      // Second conversation, same session id: the same run, answered at once.
      () => chatReply({ content: 'the trailing comma is accepted' }),
    ];
    server = await startScriptedServer(script);
    const openai = wrapOpenAI(new OpenAI({ apiKey: 'test', baseURL: `${server.url}/v1`, maxRetries: 0 }), terminator, {
      sessionId: 'run-42',
      handleRecovery: true,
      route: { model: 'gpt-4o', contextWindow: 128_000 },
    });
    const ask = (messages: Message[]) =>
      openai.chat.completions.create({ model: 'gpt-4o', messages: messages as never, tools: TOOLS as never });

    await ask(withRun('run-1'));
    const firstView = shownOutput(server.requests[0]!.body, 'run-1');
    expect(firstView.length).toBeLessThan(OUTPUT.length / 2);
    expect(firstView).toContain(FAILURE);
    // The model of the first conversation recovered the whole output.
    expect(JSON.stringify(server.requests[1]!.body)).toContain('test_case_300 PASSED');

    await ask(withRun('run-2'));
    const second = server.requests[2]!.body;
    expect(shownOutput(second, 'run-2')).toBe(firstView);
    expectNothingOfTheFirst(JSON.stringify(second));
  });
});

describe('a reused session id, through the gateway', () => {
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  it("shows the second conversation's run as the first conversation's first view, with nothing of the first", async () => {
    // The scripted model recovers the first receipt it sees in the first conversation, then answers.
    h = await startHarness((r: Recorded) => {
      const text = r.body.toString('utf8');
      const first = text.includes('run-1') && !text.includes('"tt-1"');
      if (!first) return chat.text('the trailing comma is accepted');
      const id = referencedArtifacts(shownOutput(r.json, 'run-1'))[0] ?? 'none';
      return chat.calls([
        { id: 'tt-1', name: 'token_terminator', args: { action: 'artifact_get', artifact_id: id, limit: 200_000 } },
      ]);
    });
    const openai = new OpenAI({ apiKey: 'sk-test', baseURL: `${h.url}/v1`, maxRetries: 0 });
    const ask = (messages: Message[]) =>
      openai.chat.completions.create({ model: 'gpt-4o', messages: messages as never, tools: TOOLS as never });

    await ask(withRun('run-1'));
    const firstView = shownOutput(h.upstream.requests[0]!.json, 'run-1');
    expect(firstView.length).toBeLessThan(OUTPUT.length / 2);
    expect(firstView).toContain(FAILURE);
    expect(h.upstream.requests[1]!.body.toString('utf8')).toContain('test_case_300 PASSED');

    // Same instructions, same first message: the gateway gives it the first conversation's session.
    await ask(withRun('run-2'));
    const second = h.upstream.requests.at(-1)!;
    expect(shownOutput(second.json, 'run-2')).toBe(firstView);
    expectNothingOfTheFirst(second.body.toString('utf8'));
  });
});
