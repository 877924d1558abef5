/**
 * What the agent acts on stays in sight in every later request: a failing run's test ids and a
 * large log's ERROR records, through the request pipeline a Terminator builds (default mode, real
 * SQLite vault, exact counter), while later turns push the outputs into the history that gets
 * digested.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { from, lastValueFrom, toArray } from 'rxjs';
import { afterAll, describe, expect, it } from 'vitest';
import { createTiktokenCounter } from '../../src/measure/index.js';
import { createTerminator } from '../../src/runtime/index.js';
import { createStep, type ProviderRequest } from '../../src/step.js';
import { createVault } from '../../src/vault/index.js';
import { pytestThreeFailures, readLog40k } from '../support/failing-outputs.js';

const dir = mkdtempSync(join(tmpdir(), 'tt-failure-sight-'));
const counter = createTiktokenCounter('o200k_base');
afterAll(() => {
  counter.dispose?.();
  rmSync(dir, { recursive: true, force: true });
});

type Message = Record<string, unknown>;

/** A later turn: the agent views another file (an output long enough to be managed). */
const laterTurn = (k: number): Message[] => [
  {
    role: 'assistant',
    content: null,
    tool_calls: [
      {
        id: `view-${k}`,
        type: 'function',
        function: { name: 'read_file', arguments: JSON.stringify({ path: `src/module_${k}.py` }) },
      },
    ],
  },
  {
    role: 'tool',
    tool_call_id: `view-${k}`,
    content: Array.from(
      { length: 90 },
      (_, i) => `${i + 1}: value_${k}_${i} = compute_${k}(${i}, scale=${i * 3}) # step ${i} of module ${k}`,
    ).join('\n'),
  },
];

/** The requests of a session in which `output` (from `call`) is followed by `later` more turns. */
function session(call: { name: string; args: unknown }, output: string, later: number): ProviderRequest[] {
  const base: Message[] = [
    { role: 'system', content: 'You are a coding agent.' },
    { role: 'user', content: 'Find out what is failing and fix it.' },
    {
      role: 'assistant',
      content: null,
      tool_calls: [
        { id: 'first', type: 'function', function: { name: call.name, arguments: JSON.stringify(call.args) } },
      ],
    },
    { role: 'tool', tool_call_id: 'first', content: output },
  ];
  const requests: ProviderRequest[] = [];
  let messages = base;
  requests.push({ model: 'gpt-4o', messages });
  for (let k = 0; k < later; k++) {
    messages = [...messages, ...laterTurn(k)];
    requests.push({ model: 'gpt-4o', messages });
  }
  return requests;
}

async function throughPipeline(requests: ProviderRequest[], name: string): Promise<string[]> {
  await using vault = await createVault({ path: join(dir, `${name}.sqlite3`) });
  await using tt = await createTerminator({ vault, counter, env: {}, metrics: false });
  const outs = await lastValueFrom(
    from(requests.map((r, i) => createStep(r, { sessionId: name, requestId: `r${i}` }))).pipe(tt.requests(), toArray()),
  );
  // The first output's rendering in each request.
  return outs.map((o) => String((o.value['messages'] as { content?: unknown }[])[3]!.content));
}

describe('what the agent acts on stays in every later request', () => {
  it('every failing test id of a run with three failures and many E lines', async () => {
    const output = pytestThreeFailures(40);
    const shown = await throughPipeline(
      session({ name: 'terminal', args: { command: 'python -m pytest tests' } }, output, 8),
      'pytest',
    );
    expect(shown.some((s) => s.startsWith('[Token Terminator digest'))).toBe(true); // not vacuous
    for (const [i, s] of shown.entries())
      for (const id of ['test_summary_layout', 'test_reorder_list', 'test_value_after_removal'])
        expect(s, `request ${i}`).toContain(`FAILED tests/test_reports.py::${id}`);
  });

  it("every ERROR record of a 40 kB log read through opencode's read tool", async () => {
    const { text, errors } = readLog40k();
    const shown = await throughPipeline(
      session({ name: 'read', args: { filePath: '/srv/app/logs/payments.log' } }, text, 8),
      'read-log',
    );
    expect(shown[0]!.length).toBeLessThan(text.length / 2); // a bounded view, then digests: not vacuous
    for (const [i, s] of shown.entries()) for (const e of errors) expect(s, `request ${i}`).toContain(e);
  });
});
