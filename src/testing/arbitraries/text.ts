/**
 * Realistic tool outputs (docs/custom-operators.md), from a few characters to well past the
 * 12,000-char thresholds where reductions start. Large texts are expanded deterministically from a
 * small shrinkable spec (shape, size, seed, vocabulary), so generation stays fast and a failing
 * 30,000-char output shrinks to a small one.
 */
import fc from 'fast-check';

/** The kinds of tool output the kit generates. */
export type OutputShape = 'terminal' | 'search' | 'file' | 'json' | 'repeated' | 'near-repeated' | 'unicode';

/** Every shape the tool-output arbitrary can draw. */
export const OUTPUT_SHAPES: readonly OutputShape[] = [
  'terminal',
  'search',
  'file',
  'json',
  'repeated',
  'near-repeated',
  'unicode',
];

/** Size classes in characters (UTF-16 length is at least this; code points may be fewer for astral text). */
export type SizeClass = 'tiny' | 'medium' | 'large';

/** Options of {@link toolOutput}; every field is optional. */
export interface ToolOutputOptions {
  /** Shapes to draw from. @defaultValue all of {@link OUTPUT_SHAPES} */
  readonly shapes?: readonly OutputShape[];
  /** Size classes to draw from. @defaultValue tiny, medium and large (large is 12,001–30,000 chars) */
  readonly sizes?: readonly SizeClass[] | undefined;
}

/** The shrinkable description a tool output is expanded from. */
export interface OutputSpec {
  readonly shape: OutputShape;
  readonly targetChars: number;
  readonly seed: number;
  readonly words: readonly string[];
}

const SIZE_RANGES: Record<SizeClass, readonly [number, number]> = {
  tiny: [0, 300],
  medium: [300, 6_000],
  large: [12_001, 30_000],
};

// Astral-plane characters (surrogate pairs in UTF-16) next to BMP scripts and combining marks:
// code-point counting and splitting bugs show up on exactly these.
const UNICODE_WORDS = [
  '😀',
  '🚀',
  '𝔘𝔫𝔦𝔠𝔬𝔡𝔢',
  '𠜎𠜱',
  'naïve',
  'e\u0301',
  'Straße',
  'αβγ',
  'данные',
  '中文字符',
  'עברית',
  '🏳️‍🌈',
  'ﬁle',
];
const WORDS = [
  'alpha',
  'build',
  'cache',
  'delta',
  'error',
  'fetch',
  'graph',
  'index',
  'merge',
  'parse',
  'queue',
  'route',
  'token',
  'vault',
  'write',
];
const PATHS = [
  'src/index.ts',
  'src/vault/sqlite.ts',
  'operators/compile.ts',
  'test/app.test.ts',
  'README.md',
  'lib/utils/strings.py',
  'cmd/main.go',
];

/** Deterministic PRNG (mulberry32) so one seed always expands to the same text. */
export { prng } from '../../prng.js';
import { prng } from '../../prng.js';

/**
 * Expand a spec into text. Pure: the same spec always gives the same string.
 *
 * @example
 * import { expandOutput, outputSpec } from 'token-terminator/testing';
 * import fc from 'fast-check';
 * const [spec] = fc.sample(outputSpec({ shapes: ['terminal'] }), 1);
 * const text = expandOutput(spec!); // the same spec always expands to the same text
 */
export function expandOutput(spec: OutputSpec): string {
  const rnd = prng(spec.seed);
  const pick = <V>(xs: readonly V[]): V => xs[Math.floor(rnd() * xs.length)]!;
  const vocab = spec.words.length > 0 ? spec.words : WORDS;
  const phrase = (n: number): string => Array.from({ length: 1 + Math.floor(rnd() * n) }, () => pick(vocab)).join(' ');
  const lines: string[] = [];
  let chars = 0;
  const repeatedLine = `${pick(['WARN', 'INFO', 'progress'])} ${phrase(4)}`;
  const push = (line: string): void => {
    lines.push(line);
    chars += line.length + 1;
  };
  let i = 0;
  const line: Record<OutputShape, () => string> = {
    terminal: () =>
      pick([
        `$ ${pick(['npm test', 'git status', 'cargo build', 'pytest -q', 'ls -la'])}`,
        `  ✓ ${phrase(5)} (${Math.floor(rnd() * 90)} ms)`,
        `  ✗ ${phrase(4)}`,
        `error[E0${100 + Math.floor(rnd() * 800)}]: ${phrase(6)}`,
        `warning: ${phrase(5)}`,
        `   --> ${pick(PATHS)}:${1 + Math.floor(rnd() * 400)}:${1 + Math.floor(rnd() * 80)}`,
        `Compiling ${pick(vocab)} v0.${Math.floor(rnd() * 20)}.${Math.floor(rnd() * 10)}`,
        `exit code ${pick([0, 1, 2, 101])}`,
      ]),
    search: () => `${pick(PATHS)}:${1 + Math.floor(rnd() * 2000)}:${' '.repeat(Math.floor(rnd() * 6))}${phrase(8)}`,
    file: () => `${String(i).padStart(6, ' ')}|${' '.repeat(2 * Math.floor(rnd() * 4))}${phrase(9)}`,
    json: () =>
      `  {"id": ${i}, "name": ${JSON.stringify(phrase(2))}, "ok": ${rnd() < 0.5}, "score": ${Math.floor(rnd() * 1000) / 10}},`,
    repeated: () => (rnd() < 0.9 ? repeatedLine : phrase(6)),
    'near-repeated': () =>
      `${repeatedLine} ${i}/${Math.max(i, Math.floor(spec.targetChars / 40))} (${Math.floor(rnd() * 100)}%)`,
    unicode: () =>
      Array.from({ length: 2 + Math.floor(rnd() * 8) }, () => (rnd() < 0.6 ? pick(UNICODE_WORDS) : pick(vocab))).join(
        ' ',
      ),
  };
  while (chars < spec.targetChars || lines.length === 0) {
    i += 1;
    if (spec.shape === 'json' && lines.length === 0) push('[');
    push(line[spec.shape]());
  }
  if (spec.shape === 'json') {
    // Close the array so the output is valid JSON: tools really return JSON bodies.
    const last = lines.length - 1;
    if (last > 0) lines[last] = lines[last]!.replace(/,$/u, '');
    lines.push(']');
  }
  return lines.join('\n');
}

/**
 * The shrinkable spec behind {@link toolOutput}.
 *
 * @example
 * const output = outputSpec({ shapes: ['terminal'] }).map(expandOutput);
 */
export function outputSpec(options: ToolOutputOptions = {}): fc.Arbitrary<OutputSpec> {
  const shapes = options.shapes ?? OUTPUT_SHAPES;
  const sizes = options.sizes ?? (['tiny', 'medium', 'large'] as const);
  if (shapes.length === 0 || sizes.length === 0) throw new RangeError('toolOutput: shapes and sizes must not be empty');
  const size = fc.oneof(
    ...sizes.map((s) => {
      const [min, max] = SIZE_RANGES[s];
      return fc.integer({ min, max });
    }),
  );
  return fc.record({
    shape: fc.constantFrom(...shapes),
    targetChars: size,
    seed: fc.nat(),
    words: fc.subarray([...WORDS, ...UNICODE_WORDS.slice(0, 3)], { maxLength: 6 }),
  });
}

/**
 * One tool output of a realistic shape.
 *
 * @example
 * fc.assert(fc.property(toolOutput({ sizes: ['large'] }), (text) => text.length > 12_000));
 */
export function toolOutput(options: ToolOutputOptions = {}): fc.Arbitrary<string> {
  return outputSpec(options).map(expandOutput);
}

/**
 * The output shape that fits a tool (what that tool really prints).
 *
 * @example
 * import { shapeForTool } from 'token-terminator/testing';
 * shapeForTool('read_file'); // ['file', 'unicode']
 */
export function shapeForTool(tool: string): readonly OutputShape[] {
  return Object.hasOwn(TOOL_SHAPES, tool) ? TOOL_SHAPES[tool]! : ['json', 'unicode', 'repeated'];
}

const TERMINAL_SHAPES: readonly OutputShape[] = ['terminal', 'repeated', 'near-repeated', 'unicode'];
const TOOL_SHAPES: Readonly<Record<string, readonly OutputShape[]>> = {
  terminal: TERMINAL_SHAPES,
  process: TERMINAL_SHAPES,
  search_files: ['search', 'unicode'],
  read_file: ['file', 'unicode'],
};

/**
 * Text of arbitrary code points: control characters, every Unicode plane, no fixed vocabulary.
 * For edge cases the realistic shapes do not reach; pass it as `texts` or `outputs` of the
 * request arbitraries, or use it for tool outputs directly.
 *
 * @example
 * const hostile = providerRequest({ texts: anyText({ maxLength: 24 }), outputs: anyText({ maxLength: 600 }) });
 */
export function anyText(
  options: { readonly minLength?: number; readonly maxLength?: number } = {},
): fc.Arbitrary<string> {
  return fc.string({ unit: 'binary', minLength: options.minLength ?? 0, maxLength: options.maxLength ?? 40 });
}

/**
 * A failing run: failing test ids (pytest, Go, cargo, vitest styles) and diagnostic lines (pytest
 * `E` lines, compiler errors, exceptions, log ERROR records, panics) between ordinary lines, from
 * none up to past the digest's bound of 50, optionally ending in an exit status. Every failing
 * line is distinct.
 *
 * @example
 * import { failingOutput } from 'token-terminator/testing';
 * const outputs = failingOutput({ maxFailures: 70 }); // pass as `outputs` of growingSession
 */
export function failingOutput(options: { readonly maxFailures?: number } = {}): fc.Arbitrary<string> {
  const max = options.maxFailures ?? 70;
  if (!Number.isInteger(max) || max < 0) throw new RangeError('failingOutput: maxFailures must be an integer ≥ 0');
  const word = fc.constantFrom(...WORDS);
  const name = fc.tuple(word, word, fc.nat({ max: 999 })).map(([a, b, n]) => `${a}_${b}_${n}`);
  const failure = fc.oneof(
    name.map((n) => `FAILED tests/test_${n.split('_')[0]}.py::test_${n} - AssertionError: assert 1 == 2`),
    name.map((n) => `--- FAIL: Test${n.replace(/_/g, '')} (0.00s)`),
    name.map((n) => `test tests::${n} ... FAILED`),
    name.map((n) => ` \u00d7 test/${n.split('_')[0]}.test.ts > suite > handles ${n} 12ms`),
    name.map((n) => `E       assert compute_${n}(3) == ${n.length}`),
    name.map((n) => `src/${n}.ts(12,5): error TS2304: Cannot find name '${n}'.`),
    name.map((n) => `ValueError: invalid value for ${n}`),
    name.map((n) => `2026-11-30T10:14:07.512Z ERROR worker.${n}: request failed after 3 retries`),
    name.map((n) => `panic: runtime error: index out of range in ${n}`),
  );
  const filler = fc.tuple(word, word, fc.nat({ max: 9999 })).map(([a, b, n]) => `  ${a} ${b} step ${n} ok`);
  return fc
    .record({
      // Few failures, or many (up to past the digest's bound): both ends are what digests must handle.
      lines: fc.oneof(
        fc.array(fc.tuple(fc.boolean(), failure, filler), { maxLength: Math.min(10, max) }),
        fc.array(fc.tuple(fc.boolean(), failure, filler), { minLength: Math.floor(max / 2), maxLength: max }),
      ),
      head: filler,
      exit: fc.option(fc.constantFrom(1, 2, 101), { nil: undefined }),
    })
    .map(({ lines, head, exit }) => {
      const seen = new Set<string>();
      const out = [`$ make check ${head.trim()}`];
      for (const [before, f, fill] of lines) {
        if (seen.has(f)) continue;
        seen.add(f);
        out.push(...(before ? [fill, f] : [f, fill]));
      }
      if (exit !== undefined) out.push(`[exit code: ${exit}]`);
      return out.join('\n');
    });
}

/** A test runner whose verbose output {@link verboseRun} generates. */
export type VerboseRunner = 'pytest' | 'vitest' | 'go' | 'cargo';

/** One generated verbose run: the command that printed it, its output and exit status. */
export interface VerboseRun {
  readonly runner: VerboseRunner;
  readonly command: string;
  readonly output: string;
  readonly exitCode: number;
}

/** A generated run: its three words, its size, its failing tests in order, and test `i`'s module and function name. */
interface Run {
  readonly a: string;
  readonly b: string;
  readonly c: string;
  readonly tests: number;
  readonly failures: readonly number[];
  readonly mod: (i: number) => string;
  readonly test: (i: number) => string;
}

/** What one runner prints: a test's progress lines, a failure's detail block, and the output around them. */
interface RunnerShape {
  readonly command: string;
  readonly exitCode: number;
  readonly progress: (run: Run, i: number, failed: boolean) => readonly string[];
  /** A failure's detail block, when the runner prints one after the progress lines. */
  readonly detail?: (run: Run, i: number) => readonly string[];
  readonly output: (run: Run, progress: readonly string[], details: readonly string[]) => readonly string[];
}

const RUNNERS: Readonly<Record<VerboseRunner, RunnerShape>> = {
  pytest: {
    command: 'python -m pytest -v tests',
    exitCode: 1,
    progress: ({ mod, test, tests }, i, failed) => [
      `${`tests/test_${mod(i)}.py::${test(i)} ${failed ? 'FAILED' : 'PASSED'}`.padEnd(72)} [${String(Math.floor(((i + 1) * 100) / tests)).padStart(3)}%]`,
    ],
    detail: ({ mod, test }, i) => [
      `${'_'.repeat(20)} ${test(i)} ${'_'.repeat(20)}`,
      '',
      `    def ${test(i)}():`,
      `>       assert compute_${i}(${i}) == ${i + 1}`,
      `E       assert ${i} == ${i + 1}`,
      '',
      `tests/test_${mod(i)}.py:${10 + i}: AssertionError`,
    ],
    output: ({ tests, failures, mod, test }, progress, details) => [
      `${'='.repeat(29)} test session starts ${'='.repeat(29)}`,
      'platform linux -- Python 3.11.7, pytest-8.3.4, pluggy-1.5.0 -- /usr/bin/python3',
      'rootdir: /work/project',
      `collecting ... collected ${tests} items`,
      '',
      ...progress,
      '',
      `${'='.repeat(35)} FAILURES ${'='.repeat(35)}`,
      ...details,
      `${'='.repeat(27)} short test summary info ${'='.repeat(27)}`,
      ...failures.map((i) => `FAILED tests/test_${mod(i)}.py::${test(i)} - assert ${i} == ${i + 1}`),
      `${'='.repeat(20)} ${failures.length} failed, ${tests - failures.length} passed in 3.21s ${'='.repeat(20)}`,
    ],
  },
  vitest: {
    command: 'npx vitest run --reporter=verbose',
    exitCode: 1,
    progress: ({ b, mod, test }, i, failed) => [
      ` ${failed ? '\u00d7' : '\u2713'} test/${mod(i)}.test.ts > ${b} > handles ${test(i)} ${i % 40}ms`,
    ],
    detail: ({ b, mod, test }, i) => [
      ` FAIL  test/${mod(i)}.test.ts > ${b} > handles ${test(i)}`,
      `AssertionError: expected ${i} to be ${i + 1} // Object.is equality`,
    ],
    output: ({ tests, failures }, progress, details) => [
      ' RUN  v2.1.8 /work/project',
      '',
      ...progress,
      '',
      `${'\u23af'.repeat(20)} Failed Tests ${failures.length} ${'\u23af'.repeat(20)}`,
      ...details,
      '',
      ` Tests  ${failures.length} failed | ${tests - failures.length} passed (${tests})`,
    ],
  },
  go: {
    command: 'go test -v ./...',
    exitCode: 1,
    // go prints a failure's detail inside its progress, between RUN and FAIL.
    progress: ({ b, c, mod }, i, failed) => [
      `=== RUN   Test${b}${c}${i}`,
      ...(failed ? [`    ${mod(i)}_test.go:${10 + i}: got ${i}, want ${i + 1}`] : []),
      `${failed ? '--- FAIL' : '--- PASS'}: Test${b}${c}${i} (0.00s)`,
    ],
    output: ({ a }, progress) => [...progress, 'FAIL', `FAIL\texample.com/${a}\t0.012s`, 'FAIL'],
  },
  cargo: {
    command: 'cargo test',
    exitCode: 101,
    progress: ({ mod, test }, i, failed) => [`test ${mod(i)}::${test(i)} ... ${failed ? 'FAILED' : 'ok'}`],
    detail: ({ mod, test }, i) => [
      `---- ${mod(i)}::${test(i)} stdout ----`,
      `thread '${mod(i)}::${test(i)}' panicked at src/${mod(i)}.rs:${10 + i}:5:`,
      `assertion \`left == right\` failed`,
    ],
    output: ({ tests, failures, mod, test }, progress, details) => [
      '   Compiling demo v0.1.0 (/work/demo)',
      '    Finished `test` profile [unoptimized + debuginfo] target(s) in 0.51s',
      '     Running unittests src/lib.rs (target/debug/deps/demo-1a2b3c)',
      '',
      `running ${tests} tests`,
      ...progress,
      '',
      'failures:',
      '',
      ...details,
      '',
      'failures:',
      ...failures.map((i) => `    ${mod(i)}::${test(i)}`),
      '',
      `test result: FAILED. ${tests - failures.length} passed; ${failures.length} failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s`,
      '',
      'error: test failed, to rerun pass `--lib`',
    ],
  },
};

/**
 * The verbose output of a failing test run, as the runner prints it: pytest `-v` progress
 * (`path::test FAILED   [ 20%]`), vitest's verbose reporter, `go test -v`, `cargo test`. Many
 * passing tests (up to `maxTests`), 1 to `maxFailures` failing ones anywhere among them, each
 * failure's detail block and the runner's summary.
 *
 * @example
 * import { verboseRun } from 'token-terminator/testing';
 * fc.assert(fc.property(verboseRun(), (run) => run.exitCode !== 0));
 */
export function verboseRun(
  options: { readonly maxTests?: number; readonly maxFailures?: number } = {},
): fc.Arbitrary<VerboseRun> {
  const maxTests = options.maxTests ?? 400;
  const maxFailures = options.maxFailures ?? 12;
  if (!Number.isInteger(maxTests) || maxTests < 2) throw new RangeError('verboseRun: maxTests must be an integer ≥ 2');
  if (!Number.isInteger(maxFailures) || maxFailures < 1)
    throw new RangeError('verboseRun: maxFailures must be an integer ≥ 1');
  const word = fc.constantFrom(...WORDS);
  return fc
    .record({
      runner: fc.constantFrom<VerboseRunner>('pytest', 'vitest', 'go', 'cargo'),
      tests: fc.integer({ min: 2, max: maxTests }),
      failing: fc.uniqueArray(fc.nat({ max: maxTests - 1 }), { minLength: 1, maxLength: maxFailures }),
      names: fc.array(word, { minLength: 3, maxLength: 3 }),
    })
    .map(({ runner, tests, failing, names }) => {
      const [a, b, c] = names as [string, string, string];
      const failures = [...new Set(failing.map((f) => f % tests))].sort((x, y) => x - y);
      const run: Run = { a, b, c, tests, failures, mod: (i) => `${a}_${i % 7}`, test: (i) => `test_${b}_${c}_${i}` };
      const { command, exitCode, progress, detail, output } = RUNNERS[runner];
      const lines = Array.from({ length: tests }, (_, i) => progress(run, i, failures.includes(i))).flat();
      const details = detail === undefined ? [] : failures.flatMap((i) => detail(run, i));
      return { runner, command, exitCode, output: output(run, lines, details).join('\n') };
    });
}
