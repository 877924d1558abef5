/**
 * Text that stresses a BPE pre-tokenizer: astral characters and combining marks, long runs of one
 * class (past the long-run guard's cut), code, logs, mixed scripts, every kind of Unicode
 * whitespace, special-token look-alikes and lone surrogates. Shared by the identity property test
 * and `npm run bench -- counters`, so the bench reports the same cases the test checks.
 */
import fc from 'fast-check';

// Unicode White_Space plus the characters where JavaScript's `\s` and Rust's `\s` disagree
// (U+FEFF is JS-only, U+0085 is Rust-only) and look-alikes that are not whitespace at all.
const SPACES = [
  '\t',
  '\n',
  '\v',
  '\f',
  '\r',
  ' ',
  '\u0085',
  '\u00a0',
  '\u1680',
  '\u2000',
  '\u2007',
  '\u200a',
  '\u2028',
  '\u2029',
  '\u202f',
  '\u205f',
  '\u3000',
  '\ufeff',
  '\u200b',
  '\u180e',
  '\r\n',
];
const SPECIALS = [
  '<|endoftext|>',
  '<|im_start|>',
  '<|im_end|>',
  '<|im_sep|>',
  '<|fim_prefix|>',
  '<|fim_middle|>',
  '<|fim_suffix|>',
  '<|endofprompt|>',
  '<|start|>',
  '<|message|>',
  '<|',
  '|>',
  '<EOT>',
  '<s>',
  '</s>',
];
const WORDS = [
  'the',
  'The',
  'THE',
  "don't",
  "I'M",
  "we'LL",
  'naïve',
  'Straße',
  'ǅemal',
  'İstanbul',
  'данные',
  'ΑΒΓαβγ',
  '中文字符',
  '日本語のテキスト',
  '한국어',
  'עברית',
  'العربية',
  'हिन्दी',
  'ภาษาไทย',
  'e\u0301',
  'ﬁle',
  'Ⅻ',
  '½',
  '١٢٣',
  '੧੨',
  '𝔘𝔫𝔦𝔠𝔬𝔡𝔢',
  '𠜎𠜱',
  '😀',
  '👍🏽',
  '🏳️‍🌈',
  '🇫🇷',
  '\u{1F9D1}\u200d\u{1F4BB}',
];
const CODE = [
  'function f(a, b) {\n  return a + b;\n}\n',
  'const x = { "k": [1, 2.5e-3, null, true] };',
  '    if (err != nil) {\n\t\treturn fmt.Errorf("open %s: %w", path, err)\n\t}\n',
  'def main():\n    print(f"{x!r:>10}")\n',
  '#include <stdio.h>\nint main(void){printf("%d\\n", 42);}',
  '$ npm test -- --run\n',
  'SELECT * FROM t WHERE id = 12345678901234567890;',
  '/usr/local/lib/node_modules/pkg/dist/index.js:1234:56',
  'https://example.com/a/b?c=d&e=f#g',
  '0x7ffeefbff5c8 0xDEADBEEF 1e10 3.14159 -0.0',
];
const LOG_LINES = [
  '2024-08-25T12:34:56.789Z INFO  [main] server started on :8080',
  'ERROR: test_foo (tests.test_bar.TestBaz) ... FAIL',
  'Traceback (most recent call last):\n  File "x.py", line 3, in <module>\nValueError: bad',
  '[WARNING] /src/Foo.java:[12,34] unchecked conversion',
  'npm ERR! code ELIFECYCLE\nnpm ERR! errno 1',
  '    at Object.<anonymous> (/app/index.js:10:15)',
  '✓ renders (12 ms)  ✗ fails (3 ms)',
  'id=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 status=200',
];

/** One short fragment of any kind. */
const fragment: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(...WORDS),
  fc.constantFrom(...CODE),
  fc.constantFrom(...LOG_LINES),
  fc.constantFrom(...SPECIALS),
  fc.constantFrom(...SPACES),
  fc.string({ unit: 'grapheme', maxLength: 12 }),
  fc.string({ unit: 'binary', maxLength: 8 }), // any code point, astral included
  fc.string({ unit: fc.constantFrom(...SPACES), minLength: 1, maxLength: 40 }), // whitespace runs
  fc.string({ unit: fc.constantFrom('\ud800', '\udfff', '\udbff', 'a', '😀'), maxLength: 6 }), // lone surrogates
  fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }).map(String),
);

/** A run of one repeated unit: short (inside one piece) to past the 1,024-unit guard cut. */
export const longRun: fc.Arbitrary<string> = fc
  .tuple(
    fc.constantFrom(
      'a',
      'Z',
      ' ',
      '\n',
      '\t',
      '-',
      '=',
      '/',
      '.',
      '0',
      '7',
      '😀',
      'é',
      '中',
      '\u00a0',
      'ab',
      '/\n',
      '- ',
      '\u3000',
    ),
    fc.integer({ min: 1, max: 3000 }),
  )
  .map(([unit, n]) => unit.repeat(n));

/** Mixed text: fragments joined with nothing, a space or a newline, sometimes around a long run. */
export const tokenizerText: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc
      .array(fragment, { maxLength: 24 })
      .chain((parts) => fc.constantFrom('', ' ', '\n').map((sep) => parts.join(sep))),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.array(fragment, { maxLength: 4 }), longRun, fc.array(fragment, { maxLength: 4 }))
      .map(([a, run, b]) => `${a.join('')}${run}${b.join('')}`),
  },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 200 }) },
);
