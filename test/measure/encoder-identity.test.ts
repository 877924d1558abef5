import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { get_encoding } from 'tiktoken';
import {
  acquireEncoder,
  createTiktokenCounter,
  DEFAULT_ENGINES,
  loadedEncoders,
  splitLongRuns,
  TIKTOKEN_ENCODINGS,
  type EncoderLease,
} from '../../src/measure/index.js';
import { JS_MERGE_CACHE_ENTRIES, NEWER_THAN_REFERENCE } from '../../src/measure/encoders.js';
import { prng } from '../../src/prng.js';
import { longRun, tokenizerText } from './tokenizer-text.js';

/** Cases per encoding and property; `npm run bench -- counters` runs more of the same arbitrary. */
const RUNS = 300;

const leases: EncoderLease[] = [];
const lease = (encoding: (typeof TIKTOKEN_ENCODINGS)[number], engine: 'js' | 'wasm'): EncoderLease => {
  const l = acquireEncoder(encoding, engine);
  leases.push(l);
  return l;
};
afterAll(() => {
  for (const l of leases) l.release();
});

describe.each(TIKTOKEN_ENCODINGS)('the JS engine counts exactly like tiktoken WASM (%s)', (encoding) => {
  const js = lease(encoding, 'js');
  const wasm = lease(encoding, 'wasm');

  it('on generated text: astral characters, code, logs, mixed scripts, whitespace runs, special-token strings', () => {
    fc.assert(
      fc.property(tokenizerText, (text) => {
        expect(js.count(text)).toBe(wasm.count(text));
      }),
      { numRuns: RUNS },
    );
  });

  it('through the long-run guard: guarded counts are identical to the reference guarded counts', () => {
    const fast = createTiktokenCounter(encoding, { engine: 'js' });
    const reference = createTiktokenCounter(encoding, { engine: 'wasm' });
    try {
      fc.assert(
        fc.property(fc.tuple(tokenizerText, longRun, tokenizerText), ([a, run, b]) => {
          const text = `${a}${run}${b}`;
          expect(fast.count(text)).toBe(reference.count(text));
        }),
        { numRuns: RUNS / 3 },
      );
      // A run far past the cut: still one count per piece, identical on both engines.
      const long = `x = "${'ab'.repeat(4000)}"; ${' '.repeat(5000)}${'😀'.repeat(3000)}`;
      expect(splitLongRuns(long).length).toBeGreaterThan(5);
      expect(fast.count(long)).toBe(reference.count(long));
    } finally {
      fast.dispose?.();
      reference.dispose?.();
    }
  });

  it('where JavaScript and Rust regexes disagree: U+FEFF, U+0085, the long s, lone surrogates', () => {
    const cases = [
      'a\ufeffb',
      ' \ufeff\ufeff x',
      'x\u0085\u0085y',
      '  \u0085 a',
      "it'ſ",
      "IT'ſ x'Ss",
      'a\ud800b',
      '\udfff\ud800 ',
      '😀\ud83d',
      '\ufffd\ufffd',
    ];
    for (const text of cases) expect(js.count(text), JSON.stringify(text)).toBe(wasm.count(text));
  });

  it("classifies Unicode 17.0's letters, marks and numbers as the reference's older tables do (other)", () => {
    const codePoints: number[] = [];
    for (const [from, to] of NEWER_THAN_REFERENCE) for (let cp = from - 2; cp <= to + 2; cp++) codePoints.push(cp);
    const shapes: readonly ((c: string) => string)[] = [
      (c) => `a${c}b `,
      (c) => `${c}'s `,
      (c) => ` ${c}${c}`,
      (c) => `1${c}x `,
      (c) => `"${c}\\u `,
      (c) => `A${c}b${c}'ll `,
      (c) => `123${c}\n${c} `,
    ];
    for (const shape of shapes) {
      const text = codePoints.map((cp) => shape(String.fromCodePoint(cp))).join('');
      expect(js.count(text), shape('·')).toBe(wasm.count(text));
    }
    expect(js.count('"\u{323B0}\\u')).toBe(wasm.count('"\u{323B0}\\u'));
  });

  it('past a full merge cache: pieces evicted and met again are counted exactly', () => {
    const random = prng(11);
    const word = (): string =>
      ` ${Array.from({ length: 7 }, () => String.fromCharCode(97 + Math.floor(random() * 26))).join('')}`;
    const words = Array.from({ length: JS_MERGE_CACHE_ENTRIES + JS_MERGE_CACHE_ENTRIES / 2 }, word);
    const all = words.join('');
    expect(js.count(all)).toBe(wasm.count(all));
    // The first words were evicted by the later ones; each, and a text of them, counts as before.
    const again = words.slice(0, 200);
    for (const w of again) expect(js.count(w)).toBe(wasm.count(w));
    expect(js.count(again.join(''))).toBe(wasm.count(again.join('')));
  });

  it('counts special-token strings as ordinary text (encode_ordinary)', () => {
    const raw = get_encoding(encoding);
    try {
      for (const text of ['<|endoftext|>', 'a<|im_start|>user<|im_end|>', '<|endofprompt|><|fim_prefix|>']) {
        expect(js.count(text)).toBe(raw.encode_ordinary(text).length);
        expect(js.count(text)).toBeGreaterThan(1);
      }
    } finally {
      raw.free();
    }
  });
});

describe('engines and disposal', () => {
  it('counts with the JS engine by default for both encodings', () => {
    expect(DEFAULT_ENGINES).toEqual({ o200k_base: 'js', cl100k_base: 'js' });
  });

  it('shares one engine per encoding and frees it with the last reference', () => {
    const before = loadedEncoders().find((e) => e.key === 'js:cl100k_base')?.refs ?? 0;
    const a = createTiktokenCounter('cl100k_base');
    const b = createTiktokenCounter('cl100k_base');
    expect(loadedEncoders().find((e) => e.key === 'js:cl100k_base')?.refs).toBe(before + 2);
    a.dispose?.();
    a.dispose?.();
    expect(b.count('hello world')).toBe(2);
    expect(() => a.count('hello world')).toThrow(/after dispose/);
    b.dispose?.();
    expect(loadedEncoders().find((e) => e.key === 'js:cl100k_base')?.refs ?? 0).toBe(before);
  });

  it('loads again after the last release', () => {
    const l = acquireEncoder('o200k_base', 'wasm');
    const n = l.count('hello world');
    l.release();
    l.release();
    const again = acquireEncoder('o200k_base', 'wasm');
    expect(again.count('hello world')).toBe(n);
    again.release();
  });

  it('rejects an unknown engine naming the API', () => {
    expect(() => createTiktokenCounter('o200k_base', { engine: 'rust' as 'js' })).toThrow(
      /createTiktokenCounter: unknown engine/,
    );
    expect(() => acquireEncoder('o200k_base', 'rust' as 'js')).toThrow(/acquireEncoder/);
    for (const bad of [
      () => createTiktokenCounter('o200k_base', { engine: 'rust' as 'js' }),
      () => acquireEncoder('o200k_base', 'rust' as 'js'),
      () => acquireEncoder('p50k_base' as 'o200k_base', 'js'),
    ])
      expect(bad).toThrow(expect.objectContaining({ name: 'ConfigError', code: 'E_CONFIG' }));
  });
});
