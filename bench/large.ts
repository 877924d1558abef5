/**
 * `npm run bench -- large [runs]`: large tool results through compressToolResult (real vault on a
 * temp file, o200k counter, default options: ceiling 2,000,000 chars). Per case: wall time of the
 * reduction, the longest stretch the event loop was blocked during it (the largest gap between
 * consecutive `setImmediate` turns of a sampler that runs beside it), the number of turns it got,
 * and the size of what reaches the model. Outputs are real captured fixtures repeated to size.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { firstValueFrom, of } from 'rxjs';
import { compressToolResult } from '../operators/compress-tool-result.js';
import { createTiktokenCounter } from '../src/measure/index.js';
import { createStep, type ToolResult } from '../src/step.js';
import { createVault } from '../src/vault/index.js';
import { fixture } from '../test/operators/tool-helpers.js';
import { printTable } from './_support.js';

function sized(name: string, chars: number): string {
  const base = fixture(name);
  return base.repeat(Math.ceil(chars / base.length) + 1).slice(0, chars);
}

interface Sample {
  readonly ms: number;
  readonly maxGapMs: number;
  readonly turns: number;
  readonly outChars: number;
}

async function measure(run: () => Promise<string>): Promise<Sample> {
  let last = performance.now();
  let maxGap = 0;
  let turns = 0;
  let on = true;
  const tick = (): void => {
    const now = performance.now();
    maxGap = Math.max(maxGap, now - last);
    last = now;
    turns += 1;
    if (on) setImmediate(tick);
  };
  setImmediate(tick);
  const t0 = performance.now();
  last = t0;
  const out = await run();
  const ms = performance.now() - t0;
  on = false;
  maxGap = Math.max(maxGap, performance.now() - last);
  return { ms, maxGapMs: maxGap, turns, outChars: out.length };
}

export async function main(argv: string[]): Promise<void> {
  const runs = Number(argv[0] ?? 3);
  const dir = mkdtempSync(join(tmpdir(), 'tt-bench-large-'));
  const vault = await createVault({ path: join(dir, 'vault.sqlite3') });
  const counter = createTiktokenCounter('o200k_base');
  const op = compressToolResult({ vault, counter });
  const cases: [string, string, string, number][] = [
    ['pytest log 256k', 'pytest-assert-fail.txt', 'python3 -m pytest -v tests', 262_144],
    ['pytest log 1M', 'pytest-assert-fail.txt', 'python3 -m pytest -v tests', 1_000_000],
    ['pytest log 2M (at the ceiling)', 'pytest-assert-fail.txt', 'python3 -m pytest -v tests', 2_000_000],
    ['pytest log 2M + 1 (over)', 'pytest-assert-fail.txt', 'python3 -m pytest -v tests', 2_000_001],
    ['pytest log 10M (over, > 4x)', 'pytest-assert-fail.txt', 'python3 -m pytest -v tests', 10_000_000],
    ['mvn log 2M', 'mvn-test-fail.txt', 'mvn -o -B test', 2_000_000],
    ['grep 1M (evidence: whole text)', 'grep-rn-wide.txt', 'grep -rn "subscriber" src', 1_000_000],
  ];
  const rows = [['case', 'raw chars', 'ms', 'max blocked ms', 'turns', 'out chars']];
  try {
    let k = 0;
    for (const [label, name, command, chars] of cases) {
      const content = sized(name, chars);
      const samples: Sample[] = [];
      for (let r = 0; r < runs; r += 1) {
        // A fresh session and call id each run, so no memo or dedup shortcut is measured.
        const value: ToolResult = { callId: `c${k++}`, name: 'terminal', args: { command }, content, exitCode: 1 };
        samples.push(
          await measure(
            async () =>
              (await firstValueFrom(of(createStep(value, { sessionId: `large-${k}` })).pipe(op))).value.content,
          ),
        );
      }
      samples.sort((a, b) => a.maxGapMs - b.maxGapMs);
      const m = samples[Math.floor(samples.length / 2)]!;
      rows.push([label, String(chars), m.ms.toFixed(0), m.maxGapMs.toFixed(1), String(m.turns), String(m.outChars)]);
    }
  } finally {
    counter.dispose?.();
    await vault.close();
    rmSync(dir, { recursive: true, force: true });
  }
  printTable(rows);
  console.log(
    `\n(${runs} runs per case, the median by blocked time; machine load matters: compare rows of the same run)`,
  );
}
