/**
 * Realistic tool outputs: terminal logs, search hits, numbered file reads, JSON, repeated and
 * near-repeated lines, Unicode (astral characters included), from a few characters to well past
 * the 12,000-char thresholds where reductions start.
 *
 * Large texts are expanded deterministically from a small shrinkable spec (shape, target size,
 * seed, vocabulary) instead of being drawn character by character: generation stays fast and a
 * failing 30,000-char output shrinks to a small one.
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
  /**
   * Shapes to draw from.
   *
   * @defaultValue all of {@link OUTPUT_SHAPES}
   */
  readonly shapes?: readonly OutputShape[];
  /**
   * Size classes to draw from.
   *
   * @defaultValue tiny, medium and large (large is 12,001–30,000 chars)
   */
  readonly sizes?: readonly SizeClass[];
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
  while (chars < spec.targetChars || lines.length === 0) {
    i += 1;
    switch (spec.shape) {
      case 'terminal':
        push(
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
        );
        break;
      case 'search':
        push(`${pick(PATHS)}:${1 + Math.floor(rnd() * 2000)}:${' '.repeat(Math.floor(rnd() * 6))}${phrase(8)}`);
        break;
      case 'file':
        push(`${String(i).padStart(6, ' ')}|${' '.repeat(2 * Math.floor(rnd() * 4))}${phrase(9)}`);
        break;
      case 'json':
        if (lines.length === 0) push('[');
        push(
          `  {"id": ${i}, "name": ${JSON.stringify(phrase(2))}, "ok": ${rnd() < 0.5}, "score": ${Math.floor(rnd() * 1000) / 10}},`,
        );
        break;
      case 'repeated':
        push(rnd() < 0.9 ? repeatedLine : phrase(6));
        break;
      case 'near-repeated':
        push(`${repeatedLine} ${i}/${Math.max(i, Math.floor(spec.targetChars / 40))} (${Math.floor(rnd() * 100)}%)`);
        break;
      case 'unicode':
        push(
          Array.from({ length: 2 + Math.floor(rnd() * 8) }, () =>
            rnd() < 0.6 ? pick(UNICODE_WORDS) : pick(vocab),
          ).join(' '),
        );
        break;
    }
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
  switch (tool) {
    case 'terminal':
    case 'process':
      return ['terminal', 'repeated', 'near-repeated', 'unicode'];
    case 'search_files':
      return ['search', 'unicode'];
    case 'read_file':
      return ['file', 'unicode'];
    default:
      return ['json', 'unicode', 'repeated'];
  }
}

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
