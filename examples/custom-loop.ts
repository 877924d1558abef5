/**
 * A hand-written agent loop on the official `openai` client with Token Terminator, offline: the
 * client talks to a scripted model on 127.0.0.1. The host reduces each tool result, the wrapped
 * client compiles and caps each request, and the model recovers the exact output through the
 * `token_terminator` tool. Exits non-zero if any of that does not happen.
 *
 *   npm run example:custom-loop
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import {
  handleRecoveryCall,
  recoveryToolDefinition,
  reduceToolResult,
  wrapOpenAI,
} from 'token-terminator/adapters/custom-loop';
import { referencedArtifacts, createTerminator } from 'token-terminator';

const OUTPUT = Array.from({ length: 1500 }, (_, i) => `test/case_${i}.spec.ts: PASS (${i % 97}ms)`).join('\n');
type Msg = {
  role: string;
  content?: string | null;
  tool_call_id?: string;
  tool_calls?: { id: string; type: 'function'; function: { name: string; arguments: string } }[];
};

/** The scripted model: run the tests → recover every page of what the receipt names → answer. */
const bodies: { messages: Msg[]; max_completion_tokens?: number }[] = [];
const server = createServer((req, res) => {
  let raw = '';
  req.on('data', (c: Buffer) => (raw += c.toString('utf8')));
  req.on('end', () => {
    const body = JSON.parse(raw) as (typeof bodies)[number];
    bodies.push(body);
    const tools = body.messages.filter((m) => m.role === 'tool');
    const last = tools.at(-1);
    const toolCall = (id: string, name: string, args: object) => ({
      role: 'assistant',
      content: null,
      tool_calls: [{ id, type: 'function', function: { name, arguments: JSON.stringify(args) } }],
    });
    let message: object;
    if (last === undefined) message = toolCall('run-1', 'terminal', { command: 'npm test' });
    else if (last.tool_call_id === 'run-1' || (JSON.parse(last.content ?? '{}').next_offset ?? null) !== null) {
      const offset = last.tool_call_id === 'run-1' ? 0 : (JSON.parse(last.content ?? '{}').next_offset as number);
      message = toolCall(`get-${offset}`, 'token_terminator', {
        action: 'artifact_get',
        artifact_id: referencedArtifacts(tools[0]!.content ?? '')[0] ?? 'missing',
        offset,
        limit: 20000,
      });
    } else message = { role: 'assistant', content: 'All 1500 tests pass.' };
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        id: 'c',
        object: 'chat.completion',
        created: 0,
        model: 'scripted',
        choices: [{ index: 0, message, finish_reason: 'stop' }],
      }),
    );
  });
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));

const dir = mkdtempSync(join(tmpdir(), 'tt-example-loop-'));
const terminator = await createTerminator({ overrides: { dbPath: join(dir, 'vault.sqlite3') } });
try {
  const sessionId = 'example-loop';
  const baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  const openai = wrapOpenAI(new OpenAI({ apiKey: 'offline', baseURL, maxRetries: 0 }), terminator, {
    sessionId,
    route: { model: 'gpt-4o', contextWindow: 128_000 },
  });
  const tools = [
    {
      type: 'function',
      function: { name: 'terminal', parameters: { type: 'object', properties: { command: { type: 'string' } } } },
    },
    recoveryToolDefinition(terminator, 'chat'),
  ];
  const transcript: Msg[] = [{ role: 'user', content: 'Run the tests.' }];
  const pages: string[] = [];
  for (let turn = 0; turn < 10; turn += 1) {
    const completion = await openai.chat.completions.create({
      model: 'gpt-4o',
      messages: transcript as never,
      tools: tools as never,
    });
    const message = completion.choices[0]!.message as Msg;
    transcript.push(message);
    if (message.tool_calls === undefined || message.tool_calls.length === 0) break;
    for (const call of message.tool_calls) {
      let content: string;
      if (call.function.name === 'token_terminator') {
        content = await handleRecoveryCall(terminator, call.function.arguments, sessionId);
        pages.push(JSON.parse(content).content as string);
      } else {
        const reduced = await reduceToolResult(
          terminator,
          { callId: call.id, name: 'terminal', args: JSON.parse(call.function.arguments), content: OUTPUT },
          { sessionId },
        );
        content = reduced.content;
      }
      transcript.push({ role: 'tool', tool_call_id: call.id, content });
    }
  }

  const firstView = bodies[1]!.messages.find((m) => m.role === 'tool')!.content ?? '';
  assert.ok(firstView.length < OUTPUT.length / 4, 'the model saw the large output instead of a receipt');
  assert.equal(referencedArtifacts(firstView).length, 1, 'the model saw no artifact id');
  assert.equal(pages.join(''), OUTPUT, 'recovery did not return the exact output');
  assert.ok(
    bodies.every((b) => typeof b.max_completion_tokens === 'number' && b.max_completion_tokens > 0),
    'the output cap did not reach the request',
  );
  assert.equal(transcript.at(-1)!.content, 'All 1500 tests pass.');
  console.log(
    `custom-loop example: model saw ${firstView.length} chars instead of ${OUTPUT.length}; recovered ${pages.length} page(s) exactly; cap ${bodies[0]!.max_completion_tokens}`,
  );
} finally {
  await terminator.close();
  server.close();
  rmSync(dir, { recursive: true, force: true });
}
