/**
 * The request stages, the output cap and telemetry read one measurement memo: across a session's
 * requests each text of a conversation item (its compact JSON, its spaced array segments) is
 * tokenized once, whichever of them asks — also when the host rebuilds its objects.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { canonicalJson, createTiktokenCounter } from '../../src/measure/index.js';
import type { TokenCounter } from '../../src/measure/types.js';
import { createTerminator } from '../../src/runtime/index.js';
import { attributeRequest } from '../../src/telemetry/attribution.js';
import { createMessagesMeter } from '../../src/ledger/messages-meter.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'tt-measures-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** A js tiktoken counter that logs the texts it records pieces of and the texts it derives. */
function recordingCounter() {
  const inner = createTiktokenCounter('o200k_base', { engine: 'js' });
  const recorded: string[] = [];
  const derived: string[] = [];
  const counter: TokenCounter = {
    ...inner,
    name: 'recording',
    pieces: {
      countRecorded: (t) => (recorded.push(t), inner.pieces!.countRecorded(t)),
      countDerived: (t, source, runs) => (derived.push(t), inner.pieces!.countDerived(t, source, runs)),
    },
  };
  return { inner, counter, recorded, derived };
}

describe('one measurement memo per Terminator', () => {
  it('tokenizes each text of each item once across dedupe, compile, the output cap and telemetry (3 requests)', async () => {
    const inner = createTiktokenCounter('o200k_base');
    const counted = new Map<string, number>();
    const counter: TokenCounter = {
      name: 'counting',
      exact: true,
      count: (text) => (counted.set(text, (counted.get(text) ?? 0) + 1), inner.count(text)),
    };
    await using tt = await createTerminator({ env: {}, counter, overrides: { dbPath: join(dir, 'v.sqlite3') } });
    const big = Array.from({ length: 2000 }, (_, i) => `diagnostic line ${i}: state`).join('\n');
    const call = (id: string) => ({
      role: 'assistant',
      content: '',
      tool_calls: [{ id, type: 'function', function: { name: 'terminal', arguments: '{"command":"make"}' } }],
    });
    const messages: Record<string, unknown>[] = [
      { role: 'system', content: 'You are a coding agent working in a repository.' },
      { role: 'user', content: 'Run the build and tell me what fails, please.' },
      call('c1'),
      { role: 'tool', tool_call_id: 'c1', content: big },
    ];
    const requests = [
      messages,
      [...messages, call('c2'), { role: 'tool', tool_call_id: 'c2', content: big }],
      [
        ...messages,
        call('c2'),
        { role: 'tool', tool_call_id: 'c2', content: big },
        { role: 'assistant', content: 'The build fails in the state module.' },
        { role: 'user', content: 'Fix it and run the build again, then report.' },
      ],
    ];
    const finals: unknown[][] = [];
    for (const [i, list] of requests.entries()) {
      // The last request arrives as freshly built objects (a proxy's parsed body).
      const given = i === 2 ? structuredClone(list) : list;
      const out = await tt.reduceRequest({ model: 'gpt-4o', messages: given }, { sessionId: 's', requestId: `r${i}` });
      finals.push(out.value['messages'] as unknown[]);
    }
    // Something was rewritten (so the acceptance gates counted tokens), and the cap counted it.
    expect(JSON.stringify(finals[1])).not.toContain('diagnostic line 1999",');
    const rewritten = finals[1]!.at(-1)!;
    expect(counted.get(canonicalJson(rewritten, { compact: true }))).toBe(1);
    // Every text of a conversation item (compact JSON, spaced segments) was tokenized once.
    const items = [...counted].filter(([text]) => text.includes('"role"'));
    expect(items.length).toBeGreaterThan(10);
    expect(items.filter(([, n]) => n > 1).map(([text, n]) => `${n}× ${text.slice(0, 60)}`)).toEqual([]);
    inner.dispose?.();
  });

  it("records the pieces of the compact JSON it counts, and telemetry's segments are derived from them", async () => {
    const { inner, counter, recorded, derived } = recordingCounter();
    await using tt = await createTerminator({ env: {}, counter, overrides: { dbPath: join(dir, 'v.sqlite3') } });
    const messages = [
      { role: 'system', content: 'You are a coding agent working in a repository.' },
      { role: 'user', content: 'Run the build and tell me what fails, please.' },
    ];
    await tt.reduceRequest({ model: 'gpt-4o', messages }, { sessionId: 's', requestId: 'r0' });
    await tt.settled(); // telemetry runs after the call returned
    expect(recorded).toContain(canonicalJson(messages[1], { compact: true }));
    expect(derived.some((t) => t.includes('Run the build'))).toBe(true);
    inner.dispose?.();
  });

  it('a tool output the tool-result stage counted is tokenized once: its message JSON is derived from those pieces', async () => {
    const { inner, counter, recorded, derived } = recordingCounter();
    await using tt = await createTerminator({ env: {}, counter, overrides: { dbPath: join(dir, 'v.sqlite3') } });
    const output = Array.from({ length: 1500 }, (_, i) =>
      i % 50 === 7 ? `FAILED tests/test_m${i}.py::test_${i} - assert 3 == 4` : `tests/test_m${i}.py::test_${i} PASSED`,
    ).join('\n');
    const ctx = { sessionId: 's', requestId: 'r0' };
    const reduced = await tt.reduceToolResult(
      { callId: 'c1', name: 'terminal', args: { command: 'pytest' }, content: output },
      ctx,
    );
    expect(reduced.value.content.length).toBeLessThan(output.length); // compacted: the stage counted the output
    const tool = { role: 'tool', tool_call_id: 'c1', content: output };
    const messages = [
      { role: 'user', content: 'Run the tests and tell me what fails.' },
      {
        role: 'assistant',
        content: '',
        tool_calls: [{ id: 'c1', type: 'function', function: { name: 'terminal', arguments: '{"command":"pytest"}' } }],
      },
      tool,
    ];
    // The host sends the conversation as it has it (a proxy's client): the raw output in place.
    await tt.reduceRequest({ model: 'gpt-4o', messages }, { sessionId: 's', requestId: 'r1' });
    await tt.settled();
    const compact = canonicalJson(tool, { compact: true });
    expect(recorded).not.toContain(compact);
    expect(derived).toContain(compact);
    // The figures are what tokenizing the texts gives.
    const meter = createMessagesMeter(inner);
    expect(tt.meter!.tokens(messages)).toBe(meter.tokens(messages));
    expect(tt.meter!.midTokens(tool)).toBe(inner.count(` ${canonicalJson(tool)},`));
    inner.dispose?.();
  });

  it("hands its meter to the host: attributing a request it reduced counts nothing again (the proxy's accounting)", async () => {
    const inner = createTiktokenCounter('o200k_base', { engine: 'js' });
    let plain = 0;
    const counter: TokenCounter = { ...inner, name: 'counting', count: (t) => (plain++, inner.count(t)) };
    await using tt = await createTerminator({ env: {}, counter, overrides: { dbPath: join(dir, 'v.sqlite3') } });
    const request = {
      model: 'gpt-4o',
      messages: [
        { role: 'system', content: 'You are a coding agent working in a repository.' },
        { role: 'user', content: 'Run the build and tell me what fails, please.' },
      ],
    };
    await tt.reduceRequest(request, { sessionId: 's', requestId: 'r0' });
    await tt.settled();
    const before = plain;
    const own = attributeRequest(request, createMessagesMeter(inner));
    const shared = attributeRequest(request, tt.meter!);
    expect(shared.totalTokens).toBe(own.totalTokens);
    expect(plain).toBe(before);
    inner.dispose?.();
  });
});
