/**
 * An edit result that re-prints a window of a file an earlier output still shows gets a first view
 * naming the rows that output shows (src/compact/edit-window.ts), through the request pipeline a
 * Terminator builds: the edited rows keep their numbers, the view stays byte-identical in later
 * requests, and its receipt recovers the result exactly.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { from, lastValueFrom, toArray } from 'rxjs';
import { afterAll, describe, expect, it } from 'vitest';
import { createTiktokenCounter } from '../../src/measure/index.js';
import { referencedArtifacts } from '../../src/receipts/index.js';
import { createTerminator } from '../../src/runtime/index.js';
import { createStep, type ProviderRequest } from '../../src/step.js';
import { createVault } from '../../src/vault/index.js';
import { recover } from './helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'tt-edit-window-'));
const counter = createTiktokenCounter('o200k_base');
afterAll(() => {
  counter.dispose?.();
  rmSync(dir, { recursive: true, force: true });
});

type Message = Record<string, unknown>;
const PATH = '/repo/src/main/java/org/example/RegistryProtocol.java';
const row = (i: number): string =>
  `        registry.notify(listener_${i}, url.addParameter("step", ${i})); // keep ${i}`;
const window = (rows: readonly string[], total: number, tail: string): string =>
  [`[File: ${PATH} (${total} lines total)]`, '(100 more lines above)']
    .concat(
      rows.map((r, i) => `${101 + i}:${r}`),
      [`(${total - 100 - rows.length} more lines below)`, tail],
    )
    .join('\n');
const before = Array.from({ length: 100 }, (_, i) => row(i));
const inserted = ['        if (listeners == null) {', '            listeners = new HashSet<>();', '        }'];
const after = [...before.slice(0, 50), ...inserted, ...before.slice(50, 97)];
const READ = window(before, 400, '(Open file: RegistryProtocol.java)');
const EDIT = window(after, 403, 'File updated. Please review the changes and make sure they are correct.');

const call = (id: string, name: string, args: unknown): Message => ({
  role: 'assistant',
  content: null,
  tool_calls: [{ id, type: 'function', function: { name, arguments: JSON.stringify(args) } }],
});

function requests(): ProviderRequest[] {
  const base: Message[] = [
    { role: 'system', content: 'You are a coding agent.' },
    { role: 'user', content: 'Fix the NullPointerException in RegistryProtocol.' },
    call('open-1', 'read_file', { path: PATH, line_number: 150 }),
    { role: 'tool', tool_call_id: 'open-1', content: READ },
  ];
  const edited = [
    ...base,
    call('edit-1', 'edit_file', { path: PATH }),
    { role: 'tool', tool_call_id: 'edit-1', content: EDIT },
  ];
  const later = [
    ...edited,
    call('run-1', 'terminal', { command: 'mvn -q compile' }),
    { role: 'tool', tool_call_id: 'run-1', content: 'ok' },
  ];
  return [base, edited, later].map((messages) => ({ model: 'gpt-4o', messages }));
}

describe('an edit result names the rows an earlier output still shows', () => {
  it('keeps the edited rows, names the rest, stays stable and recovers exactly', async () => {
    await using vault = await createVault({ path: join(dir, 'edit.sqlite3') });
    await using tt = await createTerminator({ vault, counter, env: {}, metrics: false });
    const outs = await lastValueFrom(
      from(requests().map((r, i) => createStep(r, { sessionId: 'edit', requestId: `r${i}` }))).pipe(
        tt.requests(),
        toArray(),
      ),
    );
    const shown = outs
      .slice(1)
      .map((o) => (o.value['messages'] as { content?: unknown }[]).map((m) => String(m.content)));
    const [first, next] = shown as [string[], string[]];
    expect(first[3]).toBe(READ); // the earlier output the view names is in sight, whole
    const view = first[5]!;
    expect(view.length).toBeLessThan(EDIT.length / 2);
    for (const [k, line] of inserted.entries()) expect(view).toContain(`${151 + k}:${line}`);
    expect(view).toContain('[lines 101-148 unchanged: as shown in the earlier read_file output (call open-1)]');
    expect(view).toMatch(
      /\[lines 156-200: lines 153-197 as shown in the earlier read_file output \(call open-1\), now 3 lower\]/,
    );
    expect(next[5]).toBe(view); // byte-identical in the next request
    const ids = referencedArtifacts(view.trimEnd().split('\n').at(-1)!);
    expect(ids).toHaveLength(1);
    expect(await recover(vault, ids[0]!)).toBe(EDIT);
  });
});
