/**
 * Real agent CLIs through the proxy, from recorded requests (test/fixtures/clients: Claude Code
 * 2.1.332, Codex CLI 0.171.0, opencode 1.18.33, each against a scripted loopback model asking for
 * one test run whose output is a 30 kB failing pytest log). Replayed as the CLI sent them — same
 * bodies, same headers, a dummy key — against a scripted upstream: their tool names are recognised
 * with no configuration, the output reaches the model smaller with every failure line and a receipt
 * that recovers exactly, the client's output cap is kept, and one conversation is one session.
 */
import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { sessionOf, tenantOf } from '../../adapters/proxy/request-identity.js';
import { referencedArtifacts } from '../../src/receipts/index.js';
import { detectFormat } from '../../src/model/index.js';
import { pytestFailure } from '../fixtures/clients/pytest-output.js';
import { recoveryCall, startHarness, type Harness } from '../proxy/support/harness.js';
import { anthropic, responses, type Recorded, type Reply } from '../proxy/support/upstream.js';

interface Fixture {
  readonly client: string;
  readonly requests: readonly {
    readonly method: string;
    readonly path: string;
    readonly headers: Record<string, string | string[]>;
    readonly body: Record<string, unknown>;
  }[];
}

const load = (name: string): Fixture =>
  JSON.parse(readFileSync(new URL(`../fixtures/clients/${name}.json`, import.meta.url), 'utf8')) as Fixture;

// Claude Code keeps the first 10 kB of the 30 kB log, up to the failure; the others send it whole or nearly.
const FAILURE = 'tests/test_parser.py::test_parser_rejects_trailing_comma FAILED';
const CALL_ID = 'call_run_tests_1';
const HOP = new Set(['host', 'content-length', 'connection', 'accept-encoding', 'transfer-encoding']);

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

/** The tool output of the recorded test run in a request body, as the client sent it. */
function toolOutput(body: Record<string, unknown>): string | undefined {
  for (const m of (body['messages'] ?? []) as { content?: unknown }[]) {
    if (!Array.isArray(m.content)) continue;
    for (const part of m.content as { type?: string; tool_use_id?: string; content?: unknown }[])
      if (
        part.type === 'tool_result' &&
        typeof part.content === 'string' &&
        part.content.includes('test session starts')
      )
        return part.content;
  }
  for (const item of (body['input'] ?? []) as { type?: string; call_id?: string; output?: unknown }[])
    if (item.type === 'function_call_output' && item.call_id === CALL_ID && typeof item.output === 'string')
      return item.output;
  return undefined;
}

/** Send one recorded request as the client did (its headers, a dummy key); the whole answer. */
function replay(url: string, r: Fixture['requests'][number]): Promise<{ status: number; body: string }> {
  const headers: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(r.headers)) if (!HOP.has(k)) headers[k] = v === '<redacted>' ? 'sk-dummy-key' : v;
  if (headers['authorization'] !== undefined) headers['authorization'] = 'Bearer sk-dummy-key';
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${url}${r.path}`, { method: r.method, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(JSON.stringify(r.body));
  });
}

/** The scripted model: recovers the first receipt it sees once, then answers. */
function model(r: Recorded): Reply {
  const text = r.body.toString('utf8');
  const stream = r.json?.['stream'] === true;
  const recovered = text.includes('"tt-1"');
  const receipt = referencedArtifacts(text.replace(/\\n/g, '\n')).length > 0;
  const blocks = receipt && !recovered ? [recoveryCall(r.json)] : [{ text: 'done' }];
  if (r.path.startsWith('/v1/responses')) return stream ? responses.stream(blocks) : responses.reply(blocks);
  if (stream) return anthropic.stream(blocks);
  return receipt && !recovered ? anthropic.calls([recoveryCall(r.json)]) : anthropic.text('done');
}

/** The recovered text the proxy sent upstream after answering the model's recovery call. */
function recoveredText(r: Recorded): string | undefined {
  const body = r.json ?? {};
  for (const m of (body['messages'] ?? []) as { content?: unknown }[])
    if (Array.isArray(m.content))
      for (const part of m.content as { type?: string; tool_use_id?: string; content?: unknown }[])
        if (part.type === 'tool_result' && part.tool_use_id === 'tt-1') return recoveredContent(part.content);
  for (const item of (body['input'] ?? []) as { type?: string; call_id?: string; output?: unknown }[])
    if (item.type === 'function_call_output' && item.call_id === 'tt-1') return recoveredContent(item.output);
  return undefined;
}

function recoveredContent(value: unknown): string | undefined {
  const text = Array.isArray(value) ? (value as { text?: string }[]).map((p) => p.text ?? '').join('') : value;
  if (typeof text !== 'string') return undefined;
  try {
    return (JSON.parse(text) as { content?: string }).content;
  } catch {
    return undefined;
  }
}

describe.each([
  { name: 'claude-code', format: 'anthropic' as const, tool: 'Bash' },
  { name: 'codex', format: 'responses' as const, tool: 'exec_command' },
  { name: 'opencode', format: 'anthropic' as const, tool: 'bash' },
])('$name, recorded', ({ name, format, tool }) => {
  const fixture = load(name);
  const withOutput = fixture.requests.find((r) => toolOutput(r.body) !== undefined)!;
  const output = toolOutput(withOutput.body)!;

  it(`calls the test run through its own tool name (${tool}) and sends its output`, () => {
    expect(JSON.stringify(withOutput.body)).toContain(`"${tool}"`);
    expect(output.length).toBeGreaterThan(9000);
  });

  it('reaches the model smaller, with the failure line and a receipt that recovers exactly; the output cap is kept', async () => {
    h = await startHarness(model);
    for (const r of fixture.requests) expect((await replay(h.url, r)).status).toBe(200);
    const sent = h.upstream.requests.find((r) => {
      const text = r.body.toString('utf8');
      return text.includes(CALL_ID) && !text.includes('"tt-1"');
    })!;
    expect(sent).toBeDefined();
    expect(sent.body.length).toBeLessThan(JSON.stringify(withOutput.body).length - output.length / 2);
    expect(sent.body.toString('utf8')).toContain(FAILURE);
    expect(referencedArtifacts(sent.body.toString('utf8').replace(/\\n/g, '\n')).length).toBeGreaterThan(0);
    const continuation = h.upstream.requests.find((r) => recoveredText(r) !== undefined);
    expect(recoveredText(continuation!)).toBe(output);
    // The client's own cap goes upstream as it was (Claude Code: claude-opus-4-8 at 64,000).
    const first = fixture.requests[0]!.body;
    const forwarded = h.upstream.requests[0]!.json!;
    expect(forwarded['model']).toBe(first['model']);
    // Codex sends no cap of its own, and gpt-5-codex's ceiling is what the Responses API gives it
    // anyway: none is added (every request goes upstream no larger than the client's, but for the tool).
    const asked = (first['max_tokens'] ?? first['max_output_tokens']) as number | undefined;
    const capOf = (body: Record<string, unknown>) =>
      (body['max_tokens'] ?? body['max_output_tokens']) as number | undefined;
    if (asked !== undefined) expect(capOf(forwarded)).toBe(asked);
    else for (const r of h.upstream.requests) expect(capOf(r.json!)).toBeUndefined();
  });

  it('counts its conversation as one session from the first request to the one carrying the output', () => {
    const conversation = fixture.requests.filter(
      (r) => Array.isArray(r.body['tools']) && (r.body['tools'] as unknown[]).length > 0,
    );
    expect(conversation.length).toBeGreaterThanOrEqual(2);
    const ids = new Set(conversation.map((r) => sessionOf(r.headers, r.body, format, tenantOf(r.headers))));
    expect(ids.size).toBe(1);
  });
});

describe('Claude Code 2.1, a system entry in messages, on /v1/messages', () => {
  // Claude Code 2.1 puts `{"role":"system"}` entries inside `messages` beside its Anthropic blocks.
  const fixture = load('claude-code');
  const ERRORS = [
    '2026-03-02 10:14:07,311 ERROR parser.core: unexpected token "," at line 41 of config/settings.json',
    '2026-03-02 10:14:09,902 ERROR worker.pool: job 7f3a2 failed: ParseError raised in parser.parse_value',
  ];
  /** A Read of a 40 kB application log, as Claude Code numbers its lines, with two ERROR lines. */
  function logRead(): string {
    const lines: string[] = [];
    for (let i = 1; lines.join('\n').length < 40_000; i++) {
      const line =
        i === 240
          ? ERRORS[0]!
          : i === 410
            ? ERRORS[1]!
            : `2026-03-02 10:${String(10 + (i % 50)).padStart(2, '0')}:0${i % 10},${String(i % 1000).padStart(3, '0')} INFO worker.pool: job ${i} done in ${(i * 37) % 900} ms`;
      lines.push(`${String(i).padStart(6)}\t${line}`);
    }
    return lines.join('\n');
  }

  it('is read as Anthropic: its new 40 kB Read result goes upstream as the bounded view with both ERROR lines', async () => {
    const recorded = fixture.requests.at(-1)!;
    const read = logRead();
    expect(read.length).toBeGreaterThan(39_000);
    const messages = recorded.body['messages'] as unknown[];
    expect(messages.some((m) => (m as { role?: string }).role === 'system')).toBe(true);
    const body = {
      ...recorded.body,
      stream: false,
      messages: [
        ...messages,
        {
          role: 'assistant',
          content: [
            { type: 'tool_use', id: 'toolu_read_1', name: 'Read', input: { file_path: '/work/project/app.log' } },
          ],
        },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_read_1', content: read }] },
      ],
    };
    h = await startHarness(() => anthropic.text('done'));
    const answer = await replay(h.url, { ...recorded, body });
    expect(answer.status).toBe(200);
    const sent = h.upstream.requests[0]!.json!;
    const last = (sent['messages'] as { content: { type: string; content: unknown }[] }[]).at(-1)!;
    const shown = last.content[0]!.content as string;
    expect(shown.length).toBeLessThan(read.length / 4);
    for (const line of ERRORS) expect(shown).toContain(line);
    expect(referencedArtifacts(shown).length).toBeGreaterThan(0);
    // The system entries stay where the client put them.
    expect((sent['messages'] as { role: string }[]).map((m) => m.role)).toEqual(
      body.messages.map((m) => (m as { role: string }).role),
    );
    // A library call with no format named guesses the same.
    expect(detectFormat(body)).toBe('anthropic');
  });
});

describe('output of a command still running', () => {
  /** The upstream copy of the output of call `callId` (Anthropic tool_result or Responses function_call_output). */
  function upstreamOutput(body: Record<string, unknown>, callId: string): string | undefined {
    for (const m of (body['messages'] ?? []) as { content?: unknown }[])
      if (Array.isArray(m.content))
        for (const p of m.content as { type?: string; tool_use_id?: string; content?: unknown }[])
          if (p.type === 'tool_result' && p.tool_use_id === callId && typeof p.content === 'string') return p.content;
    for (const item of (body['input'] ?? []) as { type?: string; call_id?: string; output?: unknown }[])
      if (item.type === 'function_call_output' && item.call_id === callId && typeof item.output === 'string')
        return item.output;
    return undefined;
  }

  it("Codex's write_stdin: the polled output of a running test run reaches the model smaller, its failure line kept", async () => {
    const recorded = load('codex').requests.find((r) => toolOutput(r.body) !== undefined)!;
    const output = toolOutput(recorded.body)!;
    const input = (recorded.body['input'] as { type?: string; call_id?: string }[]).filter(
      (i) => i.call_id !== CALL_ID,
    );
    const body = {
      ...recorded.body,
      stream: false,
      input: [
        ...input,
        {
          type: 'function_call',
          name: 'exec_command',
          arguments: '{"cmd":"sh run-tests.sh","yield_time_ms":500}',
          call_id: 'call_start_1',
        },
        {
          type: 'function_call_output',
          call_id: 'call_start_1',
          output:
            'Chunk ID: 1a2b3c\nWall time: 0.5002 seconds\nProcess running with session ID 7\nOriginal token count: 9\nOutput:\ncollecting ...',
        },
        {
          type: 'function_call',
          name: 'write_stdin',
          arguments: '{"session_id":7,"chars":""}',
          call_id: 'call_poll_1',
        },
        { type: 'function_call_output', call_id: 'call_poll_1', output },
      ],
    };
    h = await startHarness(() => responses.reply([{ text: 'done' }]));
    expect((await replay(h.url, { ...recorded, body })).status).toBe(200);
    const shown = upstreamOutput(h.upstream.requests[0]!.json!, 'call_poll_1')!;
    expect(shown.length).toBeLessThan(output.length / 2);
    expect(shown).toContain(FAILURE);
    expect(referencedArtifacts(shown).length).toBeGreaterThan(0);
  });

  it("Claude Code's TaskOutput: the output of a background Bash reaches the model smaller, its failure line kept", async () => {
    const recorded = load('claude-code').requests[0]!;
    const output = pytestFailure();
    const body = {
      ...recorded.body,
      stream: false,
      messages: [
        ...(recorded.body['messages'] as unknown[]),
        {
          role: 'assistant',
          content: [
            {
              type: 'tool_use',
              id: 'toolu_bg_1',
              name: 'Bash',
              input: { command: 'sh run-tests.sh', run_in_background: true },
            },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'toolu_bg_1', content: 'Command running in background with ID: b7' },
          ],
        },
        {
          role: 'assistant',
          content: [{ type: 'tool_use', id: 'toolu_out_1', name: 'TaskOutput', input: { task_id: 'b7', block: true } }],
        },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_out_1', content: output }] },
      ],
    };
    h = await startHarness(() => anthropic.text('done'));
    expect((await replay(h.url, { ...recorded, body })).status).toBe(200);
    const shown = upstreamOutput(h.upstream.requests[0]!.json!, 'toolu_out_1')!;
    expect(shown.length).toBeLessThan(output.length / 2);
    expect(shown).toContain(FAILURE);
    expect(referencedArtifacts(shown).length).toBeGreaterThan(0);
  });
});

describe('codex, recorded: a streamed answer spliced over a recovery round', () => {
  it('reaches Codex as one response: response.created and response.completed carry the same id', async () => {
    const fixture = load('codex');
    // Each upstream round answers under its own id, as the provider does.
    h = await startHarness((r) => {
      const text = r.body.toString('utf8');
      const receipt = referencedArtifacts(text.replace(/\\n/g, '\n')).length > 0;
      if (receipt && !text.includes('"tt-1"')) return responses.stream([recoveryCall(r.json)], 'resp-round-1');
      return responses.stream([{ text: 'done' }], receipt ? 'resp-round-2' : 'resp-first');
    });
    let answer = '';
    for (const r of fixture.requests) {
      const got = await replay(h.url, r);
      expect(got.status).toBe(200);
      if (toolOutput(r.body) !== undefined) answer = got.body;
    }
    expect(h.upstream.requests.some((r) => r.body.toString('utf8').includes('"tt-1"'))).toBe(true);
    const events = answer
      .split('\n\n')
      .map((block) => block.split('\n').find((l) => l.startsWith('data: ')))
      .filter((l): l is string => l !== undefined)
      .map((l) => JSON.parse(l.slice(6)) as { type: string; response?: { id?: string } });
    const ids = events.filter((e) => e.type === 'response.created' || e.type === 'response.completed');
    expect(ids.map((e) => e.type)).toEqual(['response.created', 'response.completed']);
    expect(ids.map((e) => e.response?.id)).toEqual(['resp-round-1', 'resp-round-1']);
    expect(answer).not.toContain('token_terminator');
  });
});
