import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from '@fast-check/vitest';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compressToolResult } from '../../operators/compress-tool-result.js';
import { deltaRepeatedOutput, type DeltaRepeatedOutputOptions } from '../../operators/delta-repeated-output.js';
import { readArtifact } from '../../src/testing/properties/recovers-exactly.js';
import { codePoints, createTiktokenCounter } from '../../src/measure/index.js';
import type { TokenCounter } from '../../src/measure/types.js';
import type { ToolResult } from '../../src/step.js';
import { deepFreeze, faultyVault, testInvariants, withDeps } from '../../src/testing/index.js';
import { createVault } from '../../src/vault/index.js';
import type { Vault } from '../../src/vault/types.js';
import { result, runOp } from './tool-helpers.js';
import { propertyDeps, TOOL_INVARIANTS } from '../support/properties.js';

let dir: string;
let counter: TokenCounter;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'tt-temporal-'));
  counter = createTiktokenCounter('o200k_base');
});
afterAll(() => {
  counter.dispose?.();
  rmSync(dir, { recursive: true, force: true });
});
let nth = 0;
const freshVault = (): Promise<Vault> => createVault({ path: join(dir, `v${(nth += 1)}.sqlite3`) });

// A 300-line listing whose lines do not factor (names, sizes and dates vary irregularly).
const listing = (change?: [number, string]): string =>
  Array.from({ length: 300 }, (_, i) =>
    change !== undefined && change[0] === i
      ? change[1]
      : `-rw-r--r-- 1 dev staff ${(i * 7919) % 100000} Mar ${1 + (i % 28)} file_${i.toString(36)}_${'abcxyz'[i % 6]}.txt`,
  ).join('\n');
const ls = (content: string, extra: Record<string, unknown> = {}) =>
  deepFreeze(result('terminal', content, { command: 'ls -l /srv/data', cwd: '/srv', ...extra }));
const idsOf = (text: string) => ({
  current: /current=(a_[0-9a-f]+)/.exec(text)?.[1],
  previous: /previous=(a_[0-9a-f]+)/.exec(text)?.[1],
});

describe('deltaRepeatedOutput', () => {
  it('baseline, unchanged and changed cases; the current id recovers the exact output', async () => {
    const vault = await freshVault();
    const op = deltaRepeatedOutput({ vault, counter });
    const first = listing();
    const second = listing();
    const third = listing([150, 'CHANGED LINE: file_new.txt was added']);
    const [a, b, c] = await runOp(op, [ls(first), ls(second), ls(third)]);
    expect(a!.value.content).toBe(first);
    expect(a!.decisions.at(-1)).toMatchObject({ kind: 'skipped', reason: 'baseline' });

    expect(
      b!.value.content.startsWith(
        '[Token Terminator temporal delta: no output changes since the previous execution | current=',
      ),
    ).toBe(true);
    expect(codePoints(b!.value.content)).toBeLessThan(first.length);
    expect(await readArtifact(vault, idsOf(b!.value.content).current!)).toBe(second);

    const delta = c!.value.content;
    expect(delta.startsWith('[Token Terminator temporal delta | current=')).toBe(true);
    expect(delta).toContain('\n+CHANGED LINE: file_new.txt was added');
    expect(delta).toMatch(/^@@ -\d+,7 \+\d+,7 @@$/m);
    expect(codePoints(delta)).toBeLessThan(third.length);
    expect(counter.count(delta)).toBeLessThan(counter.count(third));
    const ids = idsOf(delta);
    expect(await readArtifact(vault, ids.current!)).toBe(third);
    expect(await readArtifact(vault, ids.previous!)).toBe(second);
    expect(c!.decisions.at(-1)).toMatchObject({
      kind: 'applied',
      reason: 'changed',
      artifacts: [ids.current, ids.previous],
    });
    await vault.close();
  });

  it('baselines survive a restart (closed and reopened vault file)', async () => {
    const path = join(dir, 'restart.sqlite3');
    const before = await createVault({ path });
    await runOp(deltaRepeatedOutput({ vault: before }), [ls(listing())]);
    await before.close();
    const after = await createVault({ path });
    const [out] = await runOp(deltaRepeatedOutput({ vault: after }), [ls(listing([3, 'after restart']))]);
    expect(out!.value.content).toContain('+after restart');
    await after.close();
  });

  it('never shows a diff larger than the compact rendering (or the raw output)', async () => {
    const vault = await freshVault();
    const numbered = (k: number) =>
      Array.from({ length: 3000 }, (_, i) => `value ${String(i).padStart(5, '0')} = ${i * k}`).join('\n');
    const [, b] = await runOp(deltaRepeatedOutput({ vault, counter }), [ls(numbered(3)), ls(numbered(5))]);
    // Every line changed: the diff is bigger than the factored compact rendering, so nothing is shown.
    expect(b!.value.content).toBe(numbered(5));
    expect(b!.decisions.at(-1)).toMatchObject({ kind: 'skipped', reason: 'not_smaller' });
    // The baseline still advanced to the newest output.
    const [c] = await runOp(deltaRepeatedOutput({ vault, counter }), [ls(numbered(5))]);
    expect(c!.value.content).toContain('no output changes');
    const unrelated = listing().split('\n').reverse().join('\n');
    const [, e] = await runOp(deltaRepeatedOutput({ vault }), [
      ls(listing(), { command: 'ls -t' }),
      ls(unrelated, { command: 'ls -t' }),
    ]);
    expect(e!.value.content).toBe(unrelated);
    await vault.close();
  });

  it('scopes baselines by session (or workspace), cwd, backend and the normalized command', async () => {
    const vault = await freshVault();
    const text = listing();
    const session = deltaRepeatedOutput({ vault });
    const [, other] = await runOp(session, [ls(text)], { sessionId: 'A' }).then(async (a) => [
      a[0],
      (await runOp(session, [ls(text)], { sessionId: 'B' }))[0],
    ]);
    expect(other!.value.content).toBe(text);
    const workspace = deltaRepeatedOutput({ vault, scope: 'workspace' });
    await runOp(workspace, [ls(text)], { sessionId: 'A' });
    const [shared] = await runOp(workspace, [ls(text)], { sessionId: 'B' });
    expect(shared!.value.content).toContain('no output changes');
    const outs = await runOp(
      deltaRepeatedOutput({ vault }),
      [ls(text, { command: '  ls   -l /srv/data ' }), ls(text, { cwd: '/other' }), ls(text, { env_type: 'docker' })],
      { sessionId: 'A' },
    );
    expect(outs.map((o) => o.value.content.includes('no output changes'))).toEqual([true, false, false]);
    await vault.close();
  });

  it('is gated by mode, tool, size and already-reduced content', async () => {
    const vault = await freshVault();
    const text = listing();
    for (const mode of ['native', 'terminal', 'suggest', 'off'] as const) {
      const outs = await runOp(deltaRepeatedOutput({ vault, mode }), [ls(text), ls(text)]);
      expect(outs[1]!.value.content).toBe(text);
    }
    const outs = await runOp(deltaRepeatedOutput({ vault, minChars: 100_000 }), [ls(text), ls(text)]);
    expect(outs[1]!.value.content).toBe(text);
    const [, search] = await runOp(deltaRepeatedOutput({ vault }), [
      result('search_files', text),
      result('search_files', text),
    ]);
    expect(search!.value.content).toBe(text);
    expect((await vault.usage()).artifacts).toBe(0);
    await vault.close();
  });

  it('hands changed-but-not-smaller results to compressToolResult, and compress skips applied deltas', async () => {
    const vault = await freshVault();
    const text = listing();
    const outs = await runOp(
      (s) => s.pipe(deltaRepeatedOutput({ vault }), compressToolResult({ vault, terminalMinChars: 1000 })),
      [ls(text), ls(text)],
    );
    expect(outs[0]!.value.content).toContain('[Token Terminator: '); // first: compacted normally
    expect(outs[1]!.value.content.startsWith('[Token Terminator temporal delta: no output changes')).toBe(true);
    expect(outs[1]!.decisions.map((d) => d.stage)).toEqual(['deltaRepeatedOutput']);
    await vault.close();
  });

  it('fails open when the vault fails', async () => {
    const vault = await freshVault();
    const [out] = await runOp(deltaRepeatedOutput({ vault: faultyVault(vault, { failOn: ['getBaseline'] }) }), [
      ls(listing()),
    ]);
    expect(out!.value.content).toBe(listing());
    expect(out!.decisions.at(-1)).toMatchObject({ stage: 'deltaRepeatedOutput', kind: 'failed_open' });
    await vault.close();
  });

  it('rejects bad options at build time, naming the operator', () => {
    expect(() => deltaRepeatedOutput({} as DeltaRepeatedOutputOptions)).toThrow(
      /deltaRepeatedOutput: options.vault is required/,
    );
    const vault = { put: () => undefined } as unknown as Vault;
    expect(() => deltaRepeatedOutput({ vault, scope: 'global' as never })).toThrow(
      /deltaRepeatedOutput: options\.scope/,
    );
    expect(() => deltaRepeatedOutput({ vault, minChars: 0 })).toThrow(/deltaRepeatedOutput: options\.minChars/);
  });
});

const properties = await propertyDeps();

describe('deltaRepeatedOutput — properties', () => {
  const { vault: propertyVault, counter: propertyCounter } = properties;
  // Re-runs of one command whose 300-line listing does not factor, with a few lines replaced,
  // inserted or deleted between runs: every run after the first is a delta candidate.
  const base = listing().split('\n');
  const edit = fc.tuple(
    fc.integer({ min: 0, max: 299 }),
    fc.constantFrom('', 'inserted line', 'ERROR: disk full', '\u00e9t\u00e9 \ud83d\ude00'),
    fc.constantFrom('replace', 'insert', 'delete'),
  );
  const reruns: fc.Arbitrary<readonly ToolResult[]> = fc
    .array(fc.array(edit, { maxLength: 6 }), { minLength: 2, maxLength: 3 })
    .map((versions) =>
      versions.map((edits) => {
        const lines = [...base];
        for (const [at, text, kind] of edits) {
          if (kind === 'replace') lines[at] = text;
          else if (kind === 'insert') lines.splice(at, 0, text);
          else lines.splice(at, 1);
        }
        return result('terminal', lines.join('\n'), { command: 'ls -l /srv/data', cwd: '/srv' });
      }),
    );
  const op = withDeps<ToolResult>(({ vault, counter: c }) =>
    deltaRepeatedOutput({ vault, ...(c === undefined ? {} : { counter: c }) }),
  );
  // unchanged-or-smaller with the exact counter compares o200k tokens too; recovers-exactly requires
  // the exact original of every changed result to be named.
  testInvariants(test, op, {
    vault: propertyVault,
    counter: propertyCounter,
    inputs: reruns,
    only: TOOL_INVARIANTS,
    params: { numRuns: 25 },
  });

  // The same invariants for the two tool-result stages composed as createTerminator composes them:
  // one put per result, the delta against compression's own view, every receipt recovering exactly.
  const composed = withDeps<ToolResult>(({ vault, counter: c }) => {
    const gate = c === undefined ? {} : { counter: c };
    const compression = { vault, ...gate, terminalMinChars: 1000 };
    return (s) => s.pipe(deltaRepeatedOutput({ vault, ...gate, compression }), compressToolResult(compression));
  });
  testInvariants(test, composed, {
    vault: propertyVault,
    counter: propertyCounter,
    inputs: reruns,
    only: TOOL_INVARIANTS,
    params: { numRuns: 25 },
  });

  it('shows deltas on the generated re-runs, smaller in code points and o200k tokens, with a current id that recovers the input exactly', async () => {
    let changed = 0;
    for (const [k, inputs] of fc.sample(reruns, { numRuns: 25, seed: 42 }).entries()) {
      const outs = await runOp(deltaRepeatedOutput({ vault: propertyVault, counter: propertyCounter }), inputs, {
        sessionId: `coverage-${k}`,
      });
      for (const [i, out] of outs.entries()) {
        const raw = inputs[i]!.content;
        if (out.value.content === raw) continue;
        changed += 1;
        expect(codePoints(out.value.content)).toBeLessThan(codePoints(raw));
        expect(propertyCounter.count(out.value.content)).toBeLessThan(propertyCounter.count(raw));
        expect(await readArtifact(propertyVault, idsOf(out.value.content).current!)).toBe(raw);
      }
    }
    expect(changed).toBeGreaterThan(10);
  });
});
