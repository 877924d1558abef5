/**
 * The recovery tool's own results are exempt from every request stage: recognised by the call's
 * tool name or, without the call, by the result's shape; and left byte for byte as the model
 * received them by collapseDuplicates (no bounded view, no duplicate receipt, no lease) and by
 * compileRequest (no history rewrite), while the same stages keep reducing host outputs.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fc, test } from '@fast-check/vitest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readRequest } from '../../src/model/index.js';
import { isRecoveryResult } from '../../src/recovery/index.js';
import { createTerminator } from '../../src/runtime/index.js';
import type { Terminator } from '../../src/runtime/types.js';

let dir: string;
let tt: Terminator;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tt-recovery-results-'));
  tt = await createTerminator({ env: {}, overrides: { dbPath: join(dir, 'vault.sqlite3'), maxPageChars: 200_000 } });
});
afterAll(async () => {
  await tt.close();
  rmSync(dir, { recursive: true, force: true });
});

// A blank query is refused (E_INVALID_ARGUMENTS), and an error is recognised by the tool name only.
const valid = (query: string): string => (query.trim() === '' ? 'x' : query);
const lines = (n: number, tag: string): string =>
  Array.from({ length: n }, (_, i) => `${tag} evidence line ${i} value ${(i * 7) % 97}`).join('\n');

describe('isRecoveryResult — unit', () => {
  test.prop([fc.string({ minLength: 1, maxLength: 3000 }), fc.string({ maxLength: 20 })], { numRuns: 25 })(
    'recognises every artifact_get, artifact_peek, artifact_find and artifact_search result by its shape alone',
    async (content, query) => {
      const { artifactId } = await tt.vault.put({ sessionId: 'unit', content, toolName: 'terminal' }); // the session's own output: in its scope
      const results = await Promise.all(
        [
          { action: 'artifact_get', artifact_id: artifactId },
          { action: 'artifact_peek', artifact_id: artifactId },
          { action: 'artifact_find', artifact_id: artifactId, query: valid(query) },
          { action: 'artifact_search', query: valid(query) },
        ].map((args) => tt.recoveryTool.handle(args, { sessionId: 'unit' })),
      );
      for (const text of results) {
        expect(isRecoveryResult({ toolName: 'tool', value: text }), text.slice(0, 80)).toBe(true);
        expect(isRecoveryResult({ toolName: 'tool', value: [{ type: 'text', text }] })).toBe(true);
      }
    },
  );

  test.prop([fc.jsonValue(), fc.string()], { numRuns: 200 })(
    'does not take a host tool\u2019s JSON or text output for one',
    (json, text) => {
      expect(isRecoveryResult({ toolName: 'terminal', value: JSON.stringify(json) })).toBe(false);
      expect(isRecoveryResult({ toolName: 'tool', value: text })).toBe(false);
    },
  );

  it('recognises the tool by the name the call resolves to, whatever the result says', () => {
    expect(isRecoveryResult({ toolName: 'token_terminator', value: '{"error":{"code":"E_INVALID_ARGUMENTS"}}' })).toBe(
      true,
    );
    expect(
      isRecoveryResult({
        toolName: 'terminal',
        value: '[Token Terminator artifact a_0123456789abcdef0123456789abcdef | tool=terminal]',
      }),
    ).toBe(false);
    expect(
      isRecoveryResult({
        toolName: 'tool',
        value: [
          { type: 'text', text: 'a' },
          { type: 'text', text: 'b' },
        ],
      }),
    ).toBe(false);
  });
});

describe('the request stages leave recovered results alone — integration (real runtime, vault file)', () => {
  it('shows a large and a mid-sized recovered result, each twice, byte for byte in all 24 requests while host outputs are reduced', async () => {
    // Over the inline limit (collapseDuplicates would show a bounded view) and under it (compileRequest would rewrite it as it ages).
    const huge = await tt.vault.put({ sessionId: 's', content: lines(1200, 'huge'), toolName: 'terminal' });
    const mid = await tt.vault.put({ sessionId: 's', content: lines(300, 'mid'), toolName: 'terminal' });
    const results = {
      huge: await tt.recoveryTool.handle(
        { action: 'artifact_get', artifact_id: huge.artifactId, limit: 200_000 },
        { sessionId: 's' },
      ),
      mid: await tt.recoveryTool.handle(
        { action: 'artifact_get', artifact_id: mid.artifactId, limit: 200_000 },
        { sessionId: 's' },
      ),
    };
    expect(results.huge.length).toBeGreaterThan(tt.config.maxInlineChars);
    expect(results.mid.length).toBeLessThan(tt.config.maxInlineChars);
    const messages: Record<string, unknown>[] = [
      { role: 'system', content: `You are a coding agent. ${'Follow the repository conventions. '.repeat(90)}` },
      { role: 'user', content: 'Fix the bug.' },
    ];
    const recovered = new Map<string, string>();
    const recover = (id: string, which: 'huge' | 'mid'): void => {
      messages.push({
        role: 'assistant',
        content: null,
        tool_calls: [
          { id, type: 'function', function: { name: 'token_terminator', arguments: '{"action":"artifact_get"}' } },
        ],
      });
      messages.push({ role: 'tool', tool_call_id: id, content: results[which] });
      recovered.set(id, results[which]);
    };
    const stages = new Set<string>();
    let hostRewrites = 0;
    for (let t = 0; t < 24; t++) {
      messages.push({
        role: 'assistant',
        content: `thinking ${t}`,
        tool_calls: [
          { id: `c${t}`, type: 'function', function: { name: 'bash', arguments: `{"command":"step ${t}"}` } },
        ],
      });
      messages.push({ role: 'tool', tool_call_id: `c${t}`, content: lines(400, `step ${t}`) });
      if (t === 1) recover('tt-huge-1', 'huge');
      if (t === 2) recover('tt-mid-1', 'mid');
      if (t === 4) recover('tt-huge-2', 'huge');
      if (t === 5) recover('tt-mid-2', 'mid');
      const request = { model: 'gpt-4o', messages: [...messages] };
      const step = await tt.reduceRequest(request, { sessionId: 's', requestId: `r${t}` });
      for (const d of step.decisions) if (d.kind === 'applied') stages.add(d.stage);
      const view = readRequest(step.value);
      for (const slot of view.slots) {
        if (slot.kind !== 'tool_output') continue;
        const expected = recovered.get(slot.callId ?? '');
        if (expected !== undefined) expect(slot.value, `${slot.callId} in request ${t}`).toBe(expected);
        else if (slot.value !== (messages.find((m) => m['tool_call_id'] === slot.callId)?.['content'] as string))
          hostRewrites++;
      }
      expect(
        request.messages.filter(
          (m) => typeof m['tool_call_id'] === 'string' && recovered.has(m['tool_call_id'] as string),
        ),
      ).toHaveLength(recovered.size);
    }
    // The stages were at work on everything else.
    expect(stages).toContain('compileRequest');
    expect(hostRewrites).toBeGreaterThan(50);
  }, 120_000);
});
