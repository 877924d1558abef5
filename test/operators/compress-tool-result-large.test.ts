/**
 * Issue 14 item 5, "size checks first": outputs beyond the artifact ceiling, and long reductions
 * (sliced, abortable, nothing written after an abort). Real vaults on temp files; the large
 * outputs are real captured fixtures repeated, so every view is a real compaction.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { firstValueFrom, of } from 'rxjs';
import { afterAll, describe, expect, it } from 'vitest';
import { compressToolResult } from '../../operators/compress-tool-result.js';
import { deltaRepeatedOutput } from '../../operators/delta-repeated-output.js';
import { splitLines } from '../../src/compact/lines.js';
import { codePoints, createTiktokenCounter } from '../../src/measure/index.js';
import type { TokenCounter } from '../../src/measure/types.js';
import { createStep, type ToolResult } from '../../src/step.js';
import { createVault } from '../../src/vault/index.js';
import type { Vault } from '../../src/vault/types.js';
import { expectRecovers, fixture } from './tool-helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'tt-large-'));
const counter = createTiktokenCounter('o200k_base');
const vaults: Vault[] = [];
afterAll(async () => {
  for (const v of vaults) await v.close();
  counter.dispose?.();
  rmSync(dir, { recursive: true, force: true });
});
const freshVault = async (maxArtifactChars = 2_000_000): Promise<Vault> => {
  const v = await createVault({ path: join(dir, `v${vaults.length}.sqlite3`), maxArtifactChars });
  vaults.push(v);
  return v;
};

/** A captured failing pytest run repeated to `chars` code points (whole lines, ASCII). */
function pytestLog(chars: number): string {
  const base = fixture('pytest-assert-fail.txt');
  const text = base.repeat(Math.ceil(chars / base.length) + 1);
  const cut = text.lastIndexOf('\n', chars - 1);
  return (text.slice(0, cut) + '\n' + 'x'.repeat(chars)).slice(0, chars);
}

/** A counter that records the length of every text it is asked to count. */
function spyCounter(inner: TokenCounter): TokenCounter & { readonly longest: () => number } {
  let longest = 0;
  return {
    name: inner.name,
    exact: inner.exact,
    count(text: string): number {
      longest = Math.max(longest, text.length);
      return inner.count(text);
    },
    longest: () => longest,
  };
}

const terminal = (content: string, command = 'python3 -m pytest -v tests'): ToolResult => ({
  callId: 'c1',
  name: 'terminal',
  args: { command },
  content,
  exitCode: 1,
});

describe('outputs beyond the artifact ceiling', () => {
  it('one character past the ceiling gets a bounded view with a note instead of passing through', async () => {
    const ceiling = 200_000;
    const vault = await freshVault(ceiling);
    const raw = pytestLog(ceiling + 1);
    const out = await firstValueFrom(
      of(createStep(terminal(raw), { sessionId: 'big' })).pipe(
        compressToolResult({ vault, counter, maxArtifactChars: ceiling }),
      ),
    );
    expect(codePoints(out.value.content)).toBeLessThan(40_000);
    expect(out.value.content).toMatch(/over the 200,000-char artifact ceiling/);
    expect(out.value.content).toMatch(/not stored/);
    // Faithful on red still holds for what the view shows: the run's final summary is in it.
    expect(splitLines(out.value.content)).toContain(
      '======================== 5 failed, 112 passed in 4.52s =========================',
    );
    expect(out.decisions.at(-1)).toMatchObject({
      stage: 'compressToolResult',
      kind: 'applied',
      reason: 'over_ceiling',
    });
    expect((await vault.usage()).artifacts).toBe(0);
  });

  it('is detected before any compaction or tokenizing of the whole output', async () => {
    const ceiling = 300_000;
    const vault = await freshVault(ceiling);
    const spy = spyCounter(counter);
    const raw = pytestLog(ceiling + 1);
    await firstValueFrom(
      of(createStep(terminal(raw), { sessionId: 'big' })).pipe(
        compressToolResult({ vault, counter: spy, maxArtifactChars: ceiling }),
      ),
    );
    expect(spy.longest()).toBeLessThan(ceiling / 2);
  });

  it('an output at the ceiling is still compacted and recovers exactly', async () => {
    const ceiling = 200_000;
    const vault = await freshVault(ceiling);
    const raw = pytestLog(ceiling);
    const out = await firstValueFrom(
      of(createStep(terminal(raw), { sessionId: 'big' })).pipe(
        compressToolResult({ vault, counter, maxArtifactChars: ceiling }),
      ),
    );
    expect(out.decisions.at(-1)).toMatchObject({ kind: 'applied', reason: 'terminal_compacted' });
    await expectRecovers(vault, out.value.content, raw);
  });

  it('temporal deltas skip it before writing anything', async () => {
    const ceiling = 100_000;
    const vault = await freshVault(ceiling);
    const raw = pytestLog(ceiling + 1);
    const out = await firstValueFrom(
      of(createStep(terminal(raw), { sessionId: 'big', cwd: dir })).pipe(
        deltaRepeatedOutput({ vault, maxArtifactChars: ceiling }),
      ),
    );
    expect(out.decisions.at(-1)).toMatchObject({
      stage: 'deltaRepeatedOutput',
      kind: 'skipped',
      reason: 'over_ceiling',
    });
    expect((await vault.usage()).artifacts).toBe(0);
  });
});

describe('long reductions are sliced and abortable', () => {
  it('yields to the event loop while reducing a large output: macrotasks scheduled before it run before it finishes', async () => {
    const vault = await freshVault();
    const raw = pytestLog(600_000);
    let turns = 0;
    let running = true;
    const tick = (): void => {
      turns += 1;
      if (running) setImmediate(tick);
    };
    setImmediate(tick);
    const out = await firstValueFrom(
      of(createStep(terminal(raw), { sessionId: 'slices' })).pipe(compressToolResult({ vault, counter })),
    );
    running = false;
    expect(out.decisions.at(-1)).toMatchObject({ kind: 'applied' });
    // One turn is the vault's own I/O at most; slices give many.
    expect(turns).toBeGreaterThanOrEqual(8);
  });

  it('honours an abort between slices: the original passes through and nothing is written to the vault', async () => {
    const vault = await freshVault();
    const raw = pytestLog(600_000);
    const controller = new AbortController();
    setImmediate(() => controller.abort());
    const out = await firstValueFrom(
      of(createStep(terminal(raw), { sessionId: 'abort' }, controller.signal)).pipe(
        compressToolResult({ vault, counter }),
      ),
    );
    expect(out.value.content).toBe(raw);
    expect(out.decisions.some((d) => d.kind === 'applied')).toBe(false);
    expect((await vault.usage()).artifacts).toBe(0);
  });

  it('temporal deltas honour an abort before their first vault write', async () => {
    const vault = await freshVault();
    const raw = pytestLog(600_000);
    const controller = new AbortController();
    setImmediate(() => controller.abort());
    const ops = deltaRepeatedOutput({ vault });
    const out = await firstValueFrom(
      of(createStep(terminal(raw), { sessionId: 'abort', cwd: dir }, controller.signal)).pipe(ops),
    );
    expect(out.value.content).toBe(raw);
    expect((await vault.usage()).artifacts).toBe(0);
  });
});
