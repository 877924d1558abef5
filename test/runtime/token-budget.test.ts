import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTerminator } from '../../src/runtime/index.js';
import type { TokenCounter } from '../../src/measure/types.js';
import { isReceipt } from '../../src/receipts/index.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'tt-token-budget-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

/**
 * An exact counter under which every receipt or note costs more tokens than the raw text: a
 * reduction survives it only if the token half of the acceptance gate is off.
 */
const hostile: TokenCounter = {
  name: 'hostile',
  exact: true,
  count: (text) => text.length + (text.includes('Token Terminator') ? 10_000_000 : 0),
};

const big = Array.from({ length: 4000 }, (_, i) => `src/file${i % 50}.ts:${i}: match payload line ${i}`).join('\n');
const searchResult = { callId: 'c1', name: 'search_files', args: { pattern: 'match' }, content: big };

function duplicateRequest(): Record<string, unknown> {
  const call = (id: string) => ({
    role: 'assistant',
    content: null,
    tool_calls: [{ id, type: 'function', function: { name: 'terminal', arguments: '{"command":"cat big.log"}' } }],
  });
  return {
    model: 'gpt-4o',
    messages: [
      { role: 'user', content: 'look at the log twice' },
      call('t1'),
      { role: 'tool', tool_call_id: 't1', content: big },
      call('t2'),
      { role: 'tool', tool_call_id: 't2', content: big },
      { role: 'user', content: 'and now?' },
    ],
  };
}

const receipts = (request: Record<string, unknown>): number =>
  (request['messages'] as { content?: unknown }[]).filter(
    (m) => typeof m.content === 'string' && (isReceipt(m.content) || m.content.includes('[Token Terminator')),
  ).length;

describe('TOKEN_TERMINATOR_TOKEN_BUDGET (the exact-token half of acceptance)', () => {
  it('on (default): a reduction that costs more tokens is rejected, on both streams', async () => {
    await using tt = await createTerminator({
      env: {},
      overrides: { dbPath: join(dir, 'v.sqlite3') },
      counter: hostile,
    });
    const tool = await tt.reduceToolResult(searchResult, { sessionId: 's' });
    expect(tool.value.content).toBe(big);
    const request = duplicateRequest();
    const out = await tt.reduceRequest(request, { sessionId: 's', requestId: 'r1' });
    expect(receipts(out.value)).toBe(0);
  });

  it('off: the same reductions are accepted on characters alone', async () => {
    await using tt = await createTerminator({
      env: { TOKEN_TERMINATOR_TOKEN_BUDGET: 'false' },
      overrides: { dbPath: join(dir, 'v.sqlite3') },
      counter: hostile,
    });
    const tool = await tt.reduceToolResult(searchResult, { sessionId: 's' });
    expect(tool.value.content.length).toBeLessThan(big.length);
    expect(tool.value.content).toContain('[Token Terminator');
    const out = await tt.reduceRequest(duplicateRequest(), { sessionId: 's', requestId: 'r1' });
    expect(receipts(out.value)).toBeGreaterThan(0);
  });

  it('does not switch the output cap off: TOKEN_TERMINATOR_OUTPUT_CAP does', async () => {
    const request = { model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] };
    {
      await using tt = await createTerminator({
        env: { TOKEN_TERMINATOR_TOKEN_BUDGET: 'false' },
        overrides: { dbPath: join(dir, 'a.sqlite3') },
      });
      const out = await tt.reduceRequest(request, { sessionId: 's' });
      expect(out.value['max_completion_tokens']).toBe(16_384);
    }
    {
      await using tt = await createTerminator({
        env: { TOKEN_TERMINATOR_OUTPUT_CAP: 'false' },
        overrides: { dbPath: join(dir, 'b.sqlite3') },
      });
      const out = await tt.reduceRequest(request, { sessionId: 's' });
      expect(out.value).toBe(request);
    }
  });
});
