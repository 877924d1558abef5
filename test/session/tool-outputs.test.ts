import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BoundedMap, HostMemo, renderToolOutputs } from '../../src/session/tool-outputs.js';
import { createTerminator } from '../../src/runtime/index.js';

describe('BoundedMap', () => {
  it('drops the least recently written entry: a read does not refresh it, a write does; it counts the chars held', () => {
    const cache = new BoundedMap<string>(3, (key, value) => key.length + value.length);
    for (const k of ['a', 'b', 'c']) cache.set(k, k);
    expect(cache.get('a')).toBe('a');
    cache.set('d', 'd');
    expect(cache.get('a')).toBeUndefined();
    cache.set('b', 'b2');
    cache.set('e', 'e');
    expect(['b', 'c', 'd', 'e'].map((k) => cache.get(k))).toEqual(['b2', undefined, 'd', 'e']);
    expect(cache.size).toBe(3);
    expect(cache.chars).toBe(7);
  });
});

describe('renderToolOutputs', () => {
  const PYTEST = readFileSync(new URL('../fixtures/readme-setups/pytest-30k.txt', import.meta.url), 'utf8');
  const request = (content: string) => ({
    model: 'gpt-4o',
    messages: [
      { role: 'user', content: 'why?' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'c1', type: 'function', function: { name: 'bash', arguments: '{"command":"pytest"}' } }],
      },
      { role: 'tool', tool_call_id: 'c1', content },
    ],
  });
  const toolContent = (r: Record<string, unknown>) => (r['messages'] as { content: unknown }[])[2]!.content;

  it('reduces a raw output at first sight, and leaves one the host already reduced (it names an artifact) as it is', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tt-render-'));
    const t = await createTerminator({ overrides: { dbPath: join(dir, 'vault.sqlite3') } });
    try {
      const caches = () => new HostMemo();
      const raw = await renderToolOutputs(t, request(PYTEST), 'chat', { sessionId: 'a' }, caches());
      expect(raw.firstSeen).toBe(1);
      const view = String(toolContent(raw.request));
      expect(view.length).toBeLessThan(PYTEST.length);

      const atSource = await t.reduceToolResult(
        { callId: 'c1', name: 'bash', args: {}, content: PYTEST },
        { sessionId: 'b' },
      );
      const reduced = String(atSource.value.content);
      const again = await renderToolOutputs(t, request(reduced), 'chat', { sessionId: 'b' }, caches());
      expect(again.firstSeen).toBe(0);
      expect(again.changed).toBe(false);
      expect(toolContent(again.request)).toBe(reduced);
    } finally {
      await t.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('renderToolOutputs with a full vault', () => {
  const PYTEST = readFileSync(new URL('../fixtures/readme-setups/pytest-30k.txt', import.meta.url), 'utf8');
  const call = (id: string, content: string): Record<string, unknown>[] => [
    {
      role: 'assistant',
      content: null,
      tool_calls: [{ id, type: 'function', function: { name: 'bash', arguments: '{"command":"pytest"}' } }],
    },
    { role: 'tool', tool_call_id: id, content },
  ];

  it('shows a refused output as sent from then on instead of reducing it again in every later request', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tt-render-full-'));
    // Far smaller than one output: every put is refused (E_VAULT_CAPACITY) and the output passes as sent.
    const t = await createTerminator({ overrides: { dbPath: join(dir, 'vault.sqlite3'), vaultMaxBytes: 4096 } });
    let reductions = 0;
    const counted = new Proxy(t, {
      get(target, prop) {
        if (prop === 'reduceToolResult')
          return (...args: Parameters<typeof t.reduceToolResult>) => (reductions++, target.reduceToolResult(...args));
        const value: unknown = Reflect.get(target, prop);
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    try {
      const caches = new HostMemo();
      let messages: Record<string, unknown>[] = [{ role: 'user', content: 'make the tests pass' }];
      const outputs: string[] = [];
      for (let turn = 0; turn < 5; turn++) {
        const output = `${PYTEST}\nrun ${turn}`;
        outputs.push(output);
        messages = [...messages, ...call(`c${turn}`, output)];
        const out = await renderToolOutputs(counted, { model: 'gpt-4o', messages }, 'chat', { sessionId: 's' }, caches);
        // Each output is tried once, when it is new; every output is shown exactly as sent.
        expect(reductions).toBe(turn + 1);
        const shown = (out.request['messages'] as { role: string; content: unknown }[]).filter(
          (m) => m.role === 'tool',
        );
        expect(shown.map((m) => m.content)).toEqual(outputs);
      }
    } finally {
      await t.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
