import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fitWindow } from '../../operators/fit-window.js';
import { createPressure } from '../../operators/cap-output-budget.js';
import { budgetCounterFrom } from '../../src/budget/counter.js';
import { ConfigError } from '../../src/errors.js';
import { referencedArtifacts } from '../../src/receipts/index.js';
import type { ProviderRequest, StepContext } from '../../src/step.js';
import { createVault } from '../../src/vault/index.js';
import { createTerminator } from '../../src/runtime/index.js';
import type { Vault } from '../../src/vault/types.js';
import { allStrings, fileFixture, readCall, readOutput, recover, runAll } from '../compile/helpers.js';

const { counter } = fileFixture('fit-window');
const budget = budgetCounterFrom(counter);
const tokens = (r: ProviderRequest): Promise<number> => budget.countRequest(r, new AbortController().signal);
const context: StepContext = { sessionId: 's1', route: { model: 'local-model' } };

/** A chat session: system, task, then `turns` reads of `lines`-line files. */
function session(turns: number, lines: number): ProviderRequest[] {
  const messages: unknown[] = [
    { role: 'system', content: 'You are a careful coding agent.' },
    { role: 'user', content: 'Fix the failing parser test.' },
  ];
  const requests: ProviderRequest[] = [];
  for (let t = 0; t < turns; t++) {
    messages.push(readCall(`f${t}`), readOutput(`f${t}`, lines));
    requests.push({ model: 'local-model', messages: messages.slice() });
  }
  return requests;
}

describe('fitWindow (unit)', () => {
  let vault: Vault;
  beforeAll(async () => {
    vault = await createVault({ path: ':memory:' });
  });
  afterAll(async () => {
    await vault.close();
  });
  const op = (window: number, extra: Partial<Parameters<typeof fitWindow>[0]> = {}) =>
    fitWindow({
      vault,
      counter,
      budget: { compressionWindowTokens: window, minOutputTokens: 1000, counter: budget },
      ...extra,
    });

  it('leaves a request that fits alone', async () => {
    const [request] = session(1, 50);
    const [out] = await runAll(op(32_000), [[request!, context]]);
    expect(out!.value).toBe(request);
    expect(out!.decisions).toEqual([]);
  });

  it('fits every request of a growing session under W − R, keeping the prefix, the task and the newest turn', async () => {
    const requests = session(24, 120);
    const W = 8000;
    const R = 1000;
    expect((await tokens(requests.at(-1)!)) + R).toBeGreaterThan(3 * W);
    const outs = await runAll(
      op(W),
      requests.map((r) => [r, { ...context, sessionId: 'grow' }] as const),
    );
    for (const [k, out] of outs.entries()) {
      expect((await tokens(out.value)) + R).toBeLessThanOrEqual(W);
      const raw = requests[k]!['messages'] as unknown[];
      const sent = out.value['messages'] as unknown[];
      expect(sent.slice(0, 2)).toEqual(raw.slice(0, 2));
      expect(sent.slice(-2)).toEqual(raw.slice(-2));
      // Actions stay: every tool call is sent as it came.
      sent.forEach((m, i) => {
        if ((m as { role: string }).role === 'assistant') expect(m).toBe(raw[i]);
      });
    }
    // Every receipt recovers exactly what it replaced.
    const last = outs.at(-1)!;
    const ids = [...new Set(allStrings(last.value).flatMap(referencedArtifacts))];
    expect(ids.length).toBeGreaterThan(0);
    const rawTexts = new Set(allStrings(requests.at(-1)!));
    for (const id of ids) expect(rawTexts.has(await recover(vault, id))).toBe(true);
  });

  it('rewrites in batches down to the low-water mark (hysteresis), and keeps its renderings between them', async () => {
    const requests = session(40, 40);
    const outs = await runAll(
      op(8000, { lowWaterPct: 50 }),
      requests.map((r) => [r, { ...context, sessionId: 'hyst' }] as const),
    );
    const rewrites = outs.filter((o) => o.decisions.some((d) => d.reason.endsWith('new batch')));
    const over = outs.filter((o, k) => o.value !== requests[k]);
    expect(rewrites.length).toBeGreaterThan(0);
    // Far fewer cache-breaking rewrites than requests the fit touches.
    expect(rewrites.length * 3).toBeLessThan(over.length);
    // Between two rewrites, request N+1 starts with request N (the earlier items are the same text).
    for (let k = 1; k < outs.length; k++) {
      if (rewrites.includes(outs[k]!)) continue;
      const prev = outs[k - 1]!.value['messages'] as unknown[];
      const next = outs[k]!.value['messages'] as unknown[];
      expect(JSON.stringify(next.slice(0, prev.length))).toBe(JSON.stringify(prev));
    }
  });

  it('passes a request that cannot fit unchanged, says window_exceeded, and preflight pressure reaches W', async () => {
    // The newest turn alone is larger than W − R.
    const requests = session(3, 2000);
    const W = 6000;
    const last = requests.at(-1)!;
    const [out] = await runAll(op(W), [[last, { ...context, sessionId: 'huge' }]]);
    expect(out!.value).toBe(last);
    expect(out!.decisions.map((d) => [d.stage, d.kind, d.reason.split(':')[0]])).toEqual([
      ['fitWindow', 'skipped', 'window_exceeded'],
    ]);
    const pressure = createPressure({ compressionWindowTokens: W, minOutputTokens: 1000, counter: budget });
    expect(await pressure(last)).toBeGreaterThanOrEqual(W);
    await pressure.close();
  });

  it('folds blocks of old turns into one receipt each when per-item receipts are not enough, and every block recovers exactly', async () => {
    // 150 turns of small outputs: one receipt per output would not shrink them, the calls alone fill W − R.
    const requests = session(150, 3);
    const W = 4000;
    const R = 1000;
    const raw = requests.at(-1)!['messages'] as unknown[];
    expect((await tokens(requests.at(-1)!)) + R).toBeGreaterThan(2 * W);
    const outs = await runAll(
      op(W),
      requests.map((r) => [r, { ...context, sessionId: 'blocks' }] as const),
    );
    for (const [k, out] of outs.entries()) {
      expect((await tokens(out.value)) + R).toBeLessThanOrEqual(W);
      expect(out.decisions.some((d) => d.reason.startsWith('window_'))).toBe(false);
      const sent = out.value['messages'] as unknown[];
      const rawK = requests[k]!['messages'] as unknown[];
      expect(sent.slice(0, 2)).toEqual(rawK.slice(0, 2));
      expect(sent.slice(-2)).toEqual(rawK.slice(-2));
    }
    const last = outs.at(-1)!;
    const sent = last.value['messages'] as { role: string; content: unknown }[];
    const blocks = sent.filter(
      (m) => typeof m.content === 'string' && m.content.startsWith('[Token Terminator turns '),
    );
    expect(blocks.length).toBeGreaterThan(0);
    // The oldest turns go first: the first block starts right after the task.
    expect(sent[2]).toBe(blocks[0]);
    expect(blocks[0]!.content).toMatch(/^\[Token Terminator turns 1–\d+ .*\ncalled: read_file \{"path":"f0.ts"\}\n/u);
    // The calls fit, so every action stays in view verbatim (in a block's text or as a call).
    const shown = allStrings(sent).join('\n');
    for (let t = 0; t < 150; t++) expect(shown).toContain(`{"path":"f${t}.ts"}`);
    // Each block's artifact is the exact JSON of consecutive raw items; together with what is still
    // sent, the blocks give every raw item back.
    const back: unknown[] = [];
    for (const m of sent) {
      const ids =
        typeof m.content === 'string' && m.content.startsWith('[Token Terminator turns ')
          ? referencedArtifacts(m.content)
          : [];
      if (ids.length === 0) {
        back.push(m);
        continue;
      }
      expect(ids).toHaveLength(1);
      const text = await recover(vault, ids[0]!);
      const items = JSON.parse(text) as unknown[];
      expect(JSON.stringify(items)).toBe(text);
      back.push(...items);
    }
    expect(back).toEqual(raw);
  });

  it('shortens the long arguments of old calls, then names a few commands, only when the calls alone do not fit', async () => {
    // 60 editor `create` calls whose file bodies alone are ~7 times W − R; the newest turn and the task stay.
    const messages: unknown[] = [
      { role: 'system', content: 'You are a careful coding agent.' },
      { role: 'user', content: 'Write the migrations.' },
    ];
    const requests: ProviderRequest[] = [];
    for (let t = 0; t < 60; t++) {
      const body = Array.from({ length: 40 }, (_, i) => `ALTER TABLE t${t} ADD COLUMN c${i} INT;`).join('\n');
      const args = JSON.stringify({ command: 'create', path: `m${t}.sql`, file_text: body });
      messages.push(
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: `c${t}`, type: 'function', function: { name: 'str_replace_editor', arguments: args } }],
        },
        { role: 'tool', tool_call_id: `c${t}`, content: `File created successfully at: m${t}.sql` },
      );
      requests.push({ model: 'local-model', messages: messages.slice() });
    }
    const W = 4000;
    const outs = await runAll(
      op(W),
      requests.map((r) => [r, { ...context, sessionId: 'blocks-brief' }] as const),
    );
    for (const [k, out] of outs.entries()) {
      expect((await tokens(out.value)) + 1000).toBeLessThanOrEqual(W);
      expect((out.value['messages'] as unknown[]).slice(-2)).toEqual((requests[k]!['messages'] as unknown[]).slice(-2));
    }
    const reasons = outs.flatMap((o) => o.decisions.map((d) => d.reason)).join('\n');
    expect(reasons).toMatch(/block-brief|block-summary/u);
    expect(reasons).not.toMatch(/window_/u);
    // The newest calls still show their exact arguments; the oldest block names its files.
    const sent = outs.at(-1)!.value['messages'] as { content: unknown }[];
    const text = allStrings(sent).join('\n');
    expect(text).toContain('m59.sql');
    expect(text).toMatch(
      /\[Token Terminator turns 1–\d+ [^\n]*\n(called: str_replace_editor \{"command": ?"create"|ran: |files: m0\.sql)/u,
    );
  });

  it('leaves room for what the host adds after the pipeline, and a margin for a provider with its own tokenizer', async () => {
    const requests = session(30, 40);
    const W = 6000;
    const R = 1000;
    const run = async (sessionId: string, extra: Partial<StepContext>): Promise<number> => {
      const outs = await runAll(
        op(W),
        requests.map((r) => [r, { ...context, sessionId, ...extra }] as const),
      );
      let most = 0;
      for (const out of outs) most = Math.max(most, await tokens(out.value));
      return most;
    };
    // The gateway's recovery tool (~510 tokens) joins after the fit: the fit keeps room for it.
    expect(await run('added', { addedPromptTokens: 700 })).toBeLessThanOrEqual(W - R - 700);
    // Anthropic counts with its own tokenizer: o200k × 1.25 + R fits W (default margin 25 %).
    const foreign = await run('foreign', { route: { model: 'local-model', provider: 'anthropic' } });
    expect(Math.ceil(foreign * 1.25)).toBeLessThanOrEqual(W - R);
    // OpenAI's own tokenizer is the counter's: no margin, the fit uses W − R.
    const own = await run('own', { route: { model: 'local-model', provider: 'openai' } });
    expect(own).toBeGreaterThan(Math.floor((W - R) / 1.25));
    expect(own).toBeLessThanOrEqual(W - R);
  });

  it('gives an output over a fifth of the room that the agent still uses a bounded view before the digests of smaller ones become bare receipts', async () => {
    // Turn 1 reads a big file every later call names again (the agent still uses it); each later
    // turn reads a small file it never names again (the working set lets it go).
    const big = Array.from({ length: 300 }, (_, i) => `big.ts line ${i}: const value${i} = compute(${i});`).join('\n');
    const requests = bigFileTurns(big, 'big', 20, {});
    const W = 8000;
    const outs = await runAll(
      op(W),
      requests.map((r) => [r, { ...context, sessionId: 'big-view' }] as const),
    );
    const last = outs.at(-1)!.value['messages'] as { role: string; content: unknown }[];
    expect((await tokens(outs.at(-1)!.value)) + 1000).toBeLessThanOrEqual(W);
    // The big output: its head and tail in view, ending in the receipt of all of it.
    const shown = last[3]!.content as string;
    expect(shown.startsWith('big.ts line 0: const value0 = compute(0);')).toBe(true);
    expect(shown).toContain('big.ts line 299: const value299 = compute(299);');
    expect(shown.length).toBeLessThan(big.length / 2);
    const [id] = referencedArtifacts(shown);
    expect(await recover(vault, id!)).toBe(big);
    // The small outputs it made room for keep their digests (not one is a bare receipt yet).
    const outputs = last.filter((m) => m.role === 'tool').slice(1, -1);
    expect(outputs.some((m) => String(m.content).startsWith('[Token Terminator digest'))).toBe(true);
    expect(outputs.filter((m) => String(m.content).startsWith('[Token Terminator artifact'))).toEqual([]);
  });

  it('keeps in a bounded view the lines naming what the agent named after the output, besides its head and tail', async () => {
    // A big file whose middle defines `parseHeader`, which every later call names: the bounded view
    // shows that line, besides its head and tail.
    // Lines that differ by more than their numbers (a run of those would be factored into one).
    const word = (i: number): string => ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf'][i % 7]!;
    const big = Array.from({ length: 300 }, (_, i) =>
      i === 150
        ? 'big.ts line 150: export function parseHeader(raw) {'
        : `big.ts line ${i}: const ${word(i)}${word(i * 3)} = compute(${word(i * 5)});`,
    ).join('\n');
    const requests = bigFileTurns(big, 'big', 20, { symbol: 'parseHeader compute' });
    const outs = await runAll(
      op(8000),
      requests.map((r) => [r, { ...context, sessionId: 'named-view' }] as const),
    );
    const shown = (outs.at(-1)!.value['messages'] as { content: unknown }[])[3]!.content as string;
    expect(shown.startsWith('big.ts line 0: const alphaalpha = compute(alpha);')).toBe(true);
    expect(shown).toContain('big.ts line 150: export function parseHeader(raw) {');
    expect(shown.length).toBeLessThan(big.length / 2);
    const [id] = referencedArtifacts(shown);
    expect(await recover(vault, id!)).toBe(big);
  });

  it('leaves an output the agent still uses verbatim below a fifth of the room', async () => {
    // 15 % of W − R: the first fit takes the small outputs the agent is done with, and then their
    // digests to bare receipts, not this one.
    const mid = Array.from({ length: 90 }, (_, i) => `mid.ts line ${i}: const value${i} = compute(${i});`).join('\n');
    const requests = bigFileTurns(mid, 'mid', 30, {});
    const outs = await runAll(
      op(8000, { lowWaterPct: 30 }),
      requests.map((r) => [r, { ...context, sessionId: 'mid-verbatim' }] as const),
    );
    const first = outs.find((o) => o.decisions.some((d) => d.reason.endsWith('new batch')))!;
    expect(first).toBeDefined();
    expect((first.value['messages'] as { content: unknown }[])[3]!.content).toBe(mid);
  });

  it('rejects bad options at build time, naming the operator', () => {
    expect(() => fitWindow({ vault, counter, lowWaterPct: 5 })).toThrow(ConfigError);
    expect(() => fitWindow({ vault, counter, order: ['sideways' as 'view'] })).toThrow(/fitWindow/);
    expect(() => fitWindow({ vault } as unknown as Parameters<typeof fitWindow>[0])).toThrow(/counter/);
  });
});

describe('fitWindow (through the Terminator)', () => {
  it('reports preflight pressure below W when the fit makes room, and at or above W when nothing can fit', async () => {
    const W = 8000;
    await using tt = await createTerminator({
      overrides: { dbPath: ':memory:', incontext: { compressionWindowTokens: W, minOutputTokens: 1000 } },
      env: {},
      counter,
    });
    const fits = session(24, 120).at(-1)!;
    expect((await tokens(fits)) + 1000).toBeGreaterThan(2 * W);
    expect(await tt.pressure(fits, context)).toBeLessThan(W);
    const out = await tt.reduceRequest(fits, context);
    expect((await tokens(out.value)) + 1000).toBeLessThanOrEqual(W);
    // The newest output stays under the inline limit (no bounded view) yet alone is over W − R.
    const cannot = session(3, 900).at(-1)!;
    expect(await tt.pressure(cannot, { ...context, sessionId: 's2' })).toBeGreaterThanOrEqual(W);
    const passed = await tt.reduceRequest(cannot, { ...context, sessionId: 's2' });
    expect(passed.decisions.some((d) => d.stage === 'fitWindow' && d.reason.startsWith('window_exceeded'))).toBe(true);
    expect((passed.value['messages'] as unknown[]).at(-1)).toEqual((cannot['messages'] as unknown[]).at(-1));
  });
});

/**
 * A session whose first turn reads `content` (as call `name`) and whose `turns` later turns each read
 * a small file, naming `name`.ts beside it (plus `extra` arguments): one request per turn.
 */
function bigFileTurns(content: string, name: string, turns: number, extra: Record<string, string>): ProviderRequest[] {
  const messages: unknown[] = [
    { role: 'system', content: 'You are a careful coding agent.' },
    { role: 'user', content: 'Fix the failing parser test.' },
    readCall(name),
    { role: 'tool', tool_call_id: name, content },
  ];
  const requests: ProviderRequest[] = [];
  for (let t = 0; t < turns; t++) {
    const id = `f${t}`;
    const call = readCall(id) as { tool_calls: { function: { arguments: string } }[] };
    call.tool_calls[0]!.function.arguments = JSON.stringify({ path: `${id}.ts`, beside: `${name}.ts`, ...extra });
    messages.push(call, readOutput(id, 40));
    requests.push({ model: 'local-model', messages: messages.slice() });
  }
  return requests;
}
