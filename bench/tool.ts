/**
 * `npm run bench -- tool`: the tool-stream reductions on the structural benchmark fixtures (case 1: the real
 * 8,000-line git diff; case 2: the native search result) and on every captured terminal fixture.
 * Prints tokens in/out (o200k_base), the reference figures beside them, and time per call.
 * Baselines measured in the same run: the raw input, and the reference-compatible compactText.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { firstValueFrom, of, type OperatorFunction } from 'rxjs';
import { compressToolResult } from '../operators/compress-tool-result.js';
import { deltaRepeatedOutput } from '../operators/delta-repeated-output.js';
import { canonicalJson, createTiktokenCounter } from '../src/measure/index.js';
import { createStep, type Step, type ToolResult } from '../src/step.js';
import { createVault } from '../src/vault/index.js';
import { FIXTURE_COMMANDS } from '../test/fixtures/terminal/commands.js';
import { CASE1_COMMAND, case1GitDiff, FIXTURES, nativeSearchFixture } from '../test/operators/tool-helpers.js';
import { printTable } from './_support.js';

type Op = OperatorFunction<Step<ToolResult>, Step<ToolResult>>;

async function timed(op: Op, value: ToolResult, runs: number): Promise<{ out: ToolResult; ms: number }> {
  const times: number[] = [];
  let out = value;
  for (let i = 0; i < runs; i += 1) {
    const t0 = performance.now();
    out = (await firstValueFrom(of(createStep(value, { sessionId: `bench-${i}` })).pipe(op))).value;
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return { out, ms: times[Math.floor(times.length / 2)]! };
}

export async function main(argv: string[]): Promise<void> {
  const runs = Number(argv[0] ?? 5);
  const dir = mkdtempSync(join(tmpdir(), 'tt-bench-tool-'));
  const vault = await createVault({ path: join(dir, 'vault.sqlite3') });
  const counter = createTiktokenCounter('o200k_base');
  const tok = (s: string): number => counter.count(s);
  const rows: string[][] = [['case', 'raw chars', 'raw tok', 'out tok', 'ratio', 'reference', 'ms/call']];
  const row = (name: string, raw: string, out: string, ref: string, ms: number): void => {
    const [a, b] = [tok(raw), tok(out)];
    rows.push([name, String(raw.length), String(a), String(b), `${((b / a) * 100).toFixed(2)}%`, ref, ms.toFixed(1)]);
  };
  try {
    // Counting is part of the acceptance gate, so it is inside the timed call.
    const terminal = compressToolResult({ vault, counter });
    const { cwd, diff } = case1GitDiff(mkdtempSync(join(dir, 'case1-')));
    const c1 = await timed(
      terminal,
      { callId: 'c1', name: 'terminal', args: { command: CASE1_COMMAND, cwd }, content: diff, exitCode: 0 },
      runs,
    );
    row(
      'case 1 git diff (as {command,result})',
      canonicalJson({ command: CASE1_COMMAND, result: diff }),
      canonicalJson({ command: CASE1_COMMAND, result: c1.out.content }),
      'RTK 911 from 152,074',
      c1.ms,
    );

    const raw2 = nativeSearchFixture();
    const input2: ToolResult = {
      callId: 'native-1',
      name: 'search_files',
      args: { pattern: 'payload' },
      content: raw2,
    };
    const ref2 = await timed(
      compressToolResult({ vault, counter, nativeMinChars: 1000, nativeMaxChars: 4000, nativeStrategy: 'reference' }),
      input2,
      runs,
    );
    row('case 2 native search, reference mode', raw2, ref2.out.content, 'ref 1,213 from 190,999', ref2.ms);
    const auto2 = await timed(
      compressToolResult({ vault, counter, nativeMinChars: 1000, nativeMaxChars: 4000 }),
      input2,
      runs,
    );
    row('case 2 native search, auto mode', raw2, auto2.out.content, 'ref 1,213 from 190,999', auto2.ms);

    for (const file of readdirSync(FIXTURES)
      .filter((f) => f.endsWith('.txt'))
      .sort()) {
      const content = readFileSync(join(FIXTURES, file), 'utf8');
      const spec = FIXTURE_COMMANDS[file];
      const exit = spec?.exitCode === undefined ? {} : { exitCode: spec.exitCode };
      const r = await timed(
        terminal,
        { callId: file, name: 'terminal', args: { command: spec?.command ?? file }, content, ...exit },
        runs,
      );
      row(`terminal ${file}`, content, r.out.content, 'RTK: lossy, n/a', r.ms);
    }

    const listing = (k: number): string =>
      Array.from(
        { length: 300 },
        (_, i) =>
          `-rw-r--r-- 1 dev staff ${(i * 7919) % 100000} file_${i.toString(36)}${i === 150 ? `_v${k}` : ''}.txt`,
      ).join('\n');
    const temporal = deltaRepeatedOutput({ vault, counter });
    const step = (k: number): ToolResult => ({
      callId: `t${k}`,
      name: 'terminal',
      args: { command: 'ls -l', cwd: dir },
      content: listing(k),
    });
    await firstValueFrom(of(createStep(step(0), { sessionId: 'bench' })).pipe(temporal));
    const t0 = performance.now();
    const delta = (await firstValueFrom(of(createStep(step(1), { sessionId: 'bench' })).pipe(temporal))).value;
    row(
      'temporal delta, 300-line listing, 1 line changed',
      listing(1),
      delta.content,
      'ref: n/a',
      performance.now() - t0,
    );
  } finally {
    counter.dispose?.();
    await vault.close();
    rmSync(dir, { recursive: true, force: true });
  }
  printTable(rows, [0, 5]);
  console.log(
    `\n(${runs} calls per case, median; o200k_base tokens; baseline = raw input; reference mode = the reference implementation's compactText)`,
  );
}
