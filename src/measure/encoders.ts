/**
 * The BPE engines behind the tiktoken-encoding counters, one shared instance per (encoding,
 * engine) for the whole process, reference-counted so the last release frees it.
 *
 * - `wasm`: tiktoken's WASM `encode_ordinary`, the reference every other engine is tested against.
 * - `js`: gpt-tokenizer's byte-pair core (pure JS, the same vocabularies) driven by a pre-tokenizer
 *   pattern rewritten to match the reference's Rust regex semantics, which differ from
 *   JavaScript's in three places: `\s` (Rust: Unicode White_Space, so U+0085 is a space and U+FEFF
 *   is not; JavaScript: the reverse), case-insensitive contractions (Rust folds `'ſ` to `'s`) and
 *   the Unicode version of `\p{…}` (see {@link NEWER_THAN_REFERENCE}).
 *   Lone surrogates reach the reference as U+FFFD (wasm-bindgen encodes strings as UTF-8), so
 *   they are replaced the same way first. `bench/counters.ts` measures the speed-up and
 *   `test/measure/encoder-identity.test.ts` proves the counts identical.
 *
 * The vocabularies are large (o200k_base: 200k ranks), so both engines load them on first
 * acquire, never at import: importing tiktoken alone instantiates its WASM (~14 MiB).
 */
import { createRequire } from 'node:module';
import { LRUCache } from 'lru-cache';
import type { Tiktoken } from 'tiktoken';
import { pieceCounting, type PieceCounting } from './pieces.js';
import { ConfigError } from '../errors.js';
import { loadOptionalPackage } from '../optional-package.js';

/** Encodings this library counts with (the two current OpenAI chat encodings). */
export type TiktokenEncodingName = 'o200k_base' | 'cl100k_base';

/** The tiktoken encodings the counters can load. */
export const TIKTOKEN_ENCODINGS: readonly TiktokenEncodingName[] = ['o200k_base', 'cl100k_base'];

/** Which implementation counts: `js` (fast, proven identical) or `wasm` (tiktoken, the reference). */
export type EncoderEngine = 'js' | 'wasm';

/** Both {@link EncoderEngine} values. */
export const ENCODER_ENGINES: readonly EncoderEngine[] = ['js', 'wasm'];

/**
 * True when `name` is an encoding this module can load.
 *
 * @example
 * import { isTiktokenEncoding } from 'token-terminator';
 * isTiktokenEncoding('cl100k_base'); // true
 * isTiktokenEncoding('p50k_base'); // false
 */
export function isTiktokenEncoding(name: string): name is TiktokenEncodingName {
  return (TIKTOKEN_ENCODINGS as readonly string[]).includes(name);
}

/** Throw a ConfigError, naming `who`, unless `encoding` (and `engine`, when given) can be loaded. */
export function checkEncoder(who: string, encoding: string, engine?: string): void {
  if (!isTiktokenEncoding(encoding))
    throw new ConfigError(`${who}: unknown encoding "${encoding}" (accepted: ${TIKTOKEN_ENCODINGS.join(', ')})`);
  if (engine !== undefined && !(ENCODER_ENGINES as readonly string[]).includes(engine))
    throw new ConfigError(`${who}: unknown engine "${engine}" (accepted: ${ENCODER_ENGINES.join(', ')})`);
}

/** Counts the tokens of one pre-split piece, special-token strings as ordinary text. */
export type PieceCounter = (piece: string) => number;

/** A held reference to a shared engine. */
export interface EncoderLease {
  readonly encoding: TiktokenEncodingName;
  readonly engine: EncoderEngine;
  readonly count: PieceCounter;
  /**
   * Counting with piece records, to count a near-copy of a counted text without encoding the copy
   * again (src/measure/pieces.ts).
   *
   * @defaultValue present for the `js` engine, absent for `wasm`
   */
  readonly pieces?: PieceCounting;
  /** Drop this reference; the engine is freed when the last one goes. Idempotent. */
  release(): void;
}

interface Loaded {
  readonly count: PieceCounter;
  readonly pieces?: PieceCounting;
  readonly free: () => void;
  /** Empty the engine's own memo, if it has one (the JS core's merge cache). */
  readonly clearCache?: () => void;
}

interface Shared {
  readonly loaded: Loaded;
  refs: number;
}

const shared = new Map<string, Shared>();

const require = createRequire(import.meta.url);

/**
 * Take a reference to the process-wide engine for `encoding`, loading it on first use. Call
 * `release()` when done (counters do it in `dispose()`).
 *
 * @example
 * import { acquireEncoder } from 'token-terminator';
 * const lease = acquireEncoder('o200k_base', 'js');
 * try {
 *   console.log(lease.count('hello world'));
 * } finally {
 *   lease.release();
 * }
 */
export function acquireEncoder(encoding: TiktokenEncodingName, engine: EncoderEngine): EncoderLease {
  checkEncoder('acquireEncoder', encoding, engine);
  const key = `${engine}:${encoding}`;
  let entry = shared.get(key);
  if (entry === undefined) {
    entry = { loaded: engine === 'wasm' ? loadWasm(encoding) : loadJs(encoding), refs: 0 };
    shared.set(key, entry);
  }
  entry.refs++;
  const held = entry;
  let released = false;
  return {
    encoding,
    engine,
    count: held.loaded.count,
    ...(held.loaded.pieces === undefined ? {} : { pieces: held.loaded.pieces }),
    release(): void {
      if (released) return;
      released = true;
      held.refs--;
      if (held.refs <= 0 && shared.get(key) === held) {
        shared.delete(key);
        held.loaded.free();
      }
    },
  };
}

/**
 * Empty the loaded engines' bounded memos (the JS core's merge cache, at most
 * {@link JS_MERGE_CACHE_ENTRIES} pieces). For memory benches that measure everything else;
 * counting stays exact, only slower until the cache refills.
 */
export function clearEncoderCaches(): void {
  for (const e of shared.values()) e.loaded.clearCache?.();
}

/**
 * Engines currently loaded, with their reference counts (for tests and memory benches).
 *
 * @example
 * import { loadedEncoders } from 'token-terminator';
 * loadedEncoders(); // e.g. [{ key: 'js:o200k_base', refs: 1 }] while one counter holds it
 */
export function loadedEncoders(): { key: string; refs: number }[] {
  return [...shared].map(([key, e]) => ({ key, refs: e.refs }));
}

function loadWasm(encoding: TiktokenEncodingName): Loaded {
  const { get_encoding } = loadOptionalPackage<typeof import('tiktoken')>('tiktoken');
  let encoder: Tiktoken | undefined = get_encoding(encoding);
  return {
    count: (piece) => {
      if (encoder === undefined) throw new TypeError(`tiktoken:${encoding} used after it was freed`);
      return encoder.encode_ordinary(piece).length;
    },
    free: () => {
      encoder?.free();
      encoder = undefined;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The JS engine.

/** The part of gpt-tokenizer's byte-pair core we use (its own types are not exported stably). */
interface BytePairCore {
  /** Rank of a piece that is one token. */
  getBpeRankFromString(piece: string): number | undefined;
  /** The tokens of one piece (what a piece that is not one token counts). */
  bytePairEncode(piece: string): readonly number[];
  /** Rank of a byte sequence (a TypeScript-private method, replaced per instance below). */
  getBpeRankFromBytes(key: Uint8Array): number | undefined;
}

type BytePairCoreConstructor = new (config: {
  bytePairRankDecoder: readonly (string | readonly number[])[];
  tokenSplitRegex: RegExp;
  mergeCacheSize?: number;
}) => BytePairCore;

/**
 * Pieces whose merges the JS engine remembers (LRU). The core's default, 100,000, holds tens of MB;
 * most of the speed comes from the few thousand most frequent pieces (bench/counters.ts). The
 * engine keeps them in its own LRU, not in the core's: the core refreshes a piece by deleting and
 * re-adding it in a Map and evicts the Map's first key, and a Map's first key is found by walking
 * past every deleted entry, so once full each new piece cost tens of microseconds (a gateway's CPU
 * per answer rose by half after two minutes; `bench/counters.ts` "full cache" row).
 */
export const JS_MERGE_CACHE_ENTRIES = 20_000;

/**
 * The letters, marks and numbers of Unicode 17.0 (2025), as inclusive code point ranges: every
 * code point of general category L, M or N whose Unicode age is 17.0. The reference's Rust regex
 * has Unicode 16.0 tables, where these code points are unassigned (neither letter, number, mark nor
 * whitespace), while JavaScript's `\p{…}` follows the running Node's ICU (Node 20.20: Unicode
 * 17.0). The split patterns take them out of every `\p{…}` class and count them as "other", as
 * the reference does. On a Node with older tables they are unassigned in JavaScript too and this
 * changes nothing; a Node with newer tables needs its additions here (`bench/_unicode-probe.ts`
 * finds them).
 */
export const NEWER_THAN_REFERENCE: readonly (readonly [number, number])[] = Object.freeze(
  (
    [
      [0x088f, 0x088f],
      [0x0c5c, 0x0c5c],
      [0x0cdc, 0x0cdc],
      [0x1acf, 0x1add],
      [0x1ae0, 0x1aeb],
      [0xa7ce, 0xa7cf],
      [0xa7d2, 0xa7d2],
      [0xa7d4, 0xa7d4],
      [0xa7f1, 0xa7f1],
      [0x10940, 0x10959],
      [0x10ec5, 0x10ec7],
      [0x10efa, 0x10efb],
      [0x11b60, 0x11b67],
      [0x11db0, 0x11ddb],
      [0x11de0, 0x11de9],
      [0x16ea0, 0x16eb8],
      [0x16ebb, 0x16ed3],
      [0x16ff2, 0x16ff6],
      [0x187f8, 0x187ff],
      [0x18d09, 0x18d1e],
      [0x18d80, 0x18df2],
      [0x1e6c0, 0x1e6de],
      [0x1e6e0, 0x1e6f5],
      [0x1e6fe, 0x1e6ff],
      [0x2b73a, 0x2b73f],
      [0x2cea2, 0x2cead],
      [0x323b0, 0x33479], // CJK unified ideographs, extension J: 4,298 of the 4,699
    ] as const
  ).map((r) => Object.freeze(r)),
);

// Unicode White_Space, which is what `\s` means in the reference's Rust regex.
const WS = String.raw`\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000`;
const hex = (cp: number): string => `\\u{${cp.toString(16)}}`;
const NEWER = `[${NEWER_THAN_REFERENCE.map(([a, b]) => (a === b ? hex(a) : `${hex(a)}-${hex(b)}`)).join('')}]`;
/** `\p{…}` classes as the reference's tables have them (needs the `v` flag: set subtraction). */
const ref = (classes: string): string => `[[${classes}]--${NEWER}]`;
const L = ref(String.raw`\p{L}`);
const N = ref(String.raw`\p{N}`);
const S = `[${WS}]`;
const NOT_S = `[^${WS}]`;
const OTHER = `[^${WS}${L}${N}]`;
const NOT_LN_CRLF = String.raw`[^\r\n${L}${N}]`;
const CONTRACTION = String.raw`'(?:[sSſ]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD])`;
const UPPERISH = ref(String.raw`\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}`);
const LOWERISH = ref(String.raw`\p{Ll}\p{Lm}\p{Lo}\p{M}`);

/** Flags of {@link SPLIT_PATTERNS}: `v` for the classes' set subtraction. */
export const SPLIT_FLAGS = 'gv';

/**
 * The reference's pre-tokenizer patterns with Rust's `\s`, case folding and Unicode tables
 * spelled out (compile with {@link SPLIT_FLAGS}).
 */
export const SPLIT_PATTERNS: Readonly<Record<TiktokenEncodingName, string>> = Object.freeze({
  o200k_base: [
    String.raw`${NOT_LN_CRLF}?${UPPERISH}*${LOWERISH}+(?:${CONTRACTION})?`,
    String.raw`${NOT_LN_CRLF}?${UPPERISH}+${LOWERISH}*(?:${CONTRACTION})?`,
    String.raw`${N}{1,3}`,
    String.raw` ?${OTHER}+[\r\n\/]*`,
    String.raw`${S}*[\r\n]+`,
    String.raw`${S}+(?!${NOT_S})`,
    String.raw`${S}+`,
  ].join('|'),
  cl100k_base: [
    CONTRACTION,
    String.raw`${NOT_LN_CRLF}?${L}+`,
    String.raw`${N}{1,3}`,
    String.raw` ?${OTHER}+[\r\n]*`,
    String.raw`${S}*[\r\n]+`,
    String.raw`${S}+(?!${NOT_S})`,
    String.raw`${S}+`,
  ].join('|'),
});

// ES2024 string methods (Node 20 has them; the project's lib is ES2023).
interface WellFormedString {
  isWellFormed(): boolean;
  toWellFormed(): string;
}

/** Lone surrogates as U+FFFD, which is what the WASM reference receives for them. */
function wellFormed(text: string): string {
  const s = text as unknown as WellFormedString;
  return s.isWellFormed() ? text : s.toWellFormed();
}

/**
 * gpt-tokenizer 4.0.0 turns a byte sequence into a string with a default TextDecoder before
 * looking its rank up, and a default TextDecoder drops a leading U+FEFF: the 9 o200k (8 cl100k)
 * tokens that start with the bytes EF BB BF are never found, so a byte-order mark costs one
 * token more than in tiktoken. Sequences that start with those bytes are looked up here, by
 * their bytes, among exactly those tokens.
 */
function fixByteOrderMarkLookups(core: BytePairCore, ranks: readonly (string | readonly number[])[]): void {
  if (typeof core.getBpeRankFromBytes !== 'function')
    throw new TypeError('gpt-tokenizer: byte-pair core without getBpeRankFromBytes (unsupported version)');
  const bomRanks = new Map<string, number>();
  ranks.forEach((value, rank) => {
    if (typeof value !== 'string' && value[0] === 0xef && value[1] === 0xbb && value[2] === 0xbf)
      bomRanks.set(value.join(','), rank);
  });
  const lookup = core.getBpeRankFromBytes.bind(core);
  core.getBpeRankFromBytes = (key) =>
    key[0] === 0xef && key[1] === 0xbb && key[2] === 0xbf ? bomRanks.get(key.join(',')) : lookup(key);
}

function loadJs(encoding: TiktokenEncodingName): Loaded {
  const ranksPath = require.resolve(`gpt-tokenizer/cjs/bpeRanks/${encoding}`);
  const { BytePairEncodingCore } = require('gpt-tokenizer/cjs/BytePairEncodingCore') as {
    BytePairEncodingCore: BytePairCoreConstructor;
  };
  const ranks = (require(ranksPath) as { default: readonly (string | readonly number[])[] }).default;
  // The core holds the rank array itself. Out of the module cache and emptied of its exports
  // (the requiring module's `children` list still points at it), it goes with the core.
  const ranksModule = require.cache[ranksPath];
  if (ranksModule !== undefined) ranksModule.exports = {};
  delete require.cache[ranksPath];
  let core: BytePairCore | undefined = new BytePairEncodingCore({
    bytePairRankDecoder: ranks,
    tokenSplitRegex: new RegExp(SPLIT_PATTERNS[encoding], SPLIT_FLAGS),
    mergeCacheSize: 0,
  });
  fixByteOrderMarkLookups(core, ranks);
  const merges = rememberMerges(core);
  const alive = (): BytePairCore => {
    if (core === undefined) throw new TypeError(`gpt-tokenizer:${encoding} used after it was freed`);
    return core;
  };
  const byPiece = pieceCounting({
    split: new RegExp(SPLIT_PATTERNS[encoding], SPLIT_FLAGS),
    // What one piece of the split counts: one token, or its merges.
    countPiece: (piece) => {
      const c = alive();
      return c.getBpeRankFromString(piece) !== undefined ? 1 : c.bytePairEncode(piece).length;
    },
  });
  const isWellFormed = (text: string): boolean => (text as unknown as WellFormedString).isWellFormed();
  // The core's own count made a match array per piece, and scanned every text for special-token
  // strings only to count them as ordinary text: the split of piece counting makes neither.
  const count = (text: string): number => byPiece.count(wellFormed(text));
  return {
    count,
    pieces: {
      record: (text) => (isWellFormed(text) ? byPiece.record(text) : undefined),
      derive: (target, source, runs) => (isWellFormed(target) ? byPiece.derive(target, source, runs) : undefined),
    },
    free: () => {
      merges.clear();
      core = undefined;
    },
    clearCache: () => merges.clear(),
  };
}

/**
 * Put an LRU of {@link JS_MERGE_CACHE_ENTRIES} pieces in front of the core's `bytePairEncode`
 * (built without a cache of its own), which both its counting and the pieces' counting call.
 */
function rememberMerges(core: BytePairCore): LRUCache<string, readonly number[]> {
  const merges = new LRUCache<string, readonly number[]>({ max: JS_MERGE_CACHE_ENTRIES });
  const encode = core.bytePairEncode.bind(core);
  core.bytePairEncode = (piece) => {
    if (piece.length === 1) return encode(piece); // one code unit: a rank look-up or a merge of ≤ 3 bytes
    let tokens = merges.get(piece);
    if (tokens === undefined) {
      tokens = encode(piece);
      merges.set(piece, tokens);
    }
    return tokens;
  };
  return merges;
}
