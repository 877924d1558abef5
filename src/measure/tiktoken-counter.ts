import type { PieceRecord } from './pieces.js';
import type { RecordedCount, RecordingCounter, TokenCounter } from './types.js';
import { ConfigError } from '../errors.js';
import { acquireEncoder, checkEncoder, type EncoderEngine, type TiktokenEncodingName } from './encoders.js';
import { countGuarded, DEFAULT_MAX_RUN, splitLongRuns } from './long-runs.js';
import type { TokenizerJsonCounterOptions } from './tokenizer-json-counter.js';

/**
 * The engine each encoding counts with by default: the pure-JS one wherever the identity test
 * (test/measure/encoder-identity.test.ts) and the corpus check of `npm run bench -- counters`
 * found it identical to tiktoken's WASM, which stays available as `engine: 'wasm'`.
 *
 * @example
 * import { DEFAULT_ENGINES } from 'token-terminator';
 * DEFAULT_ENGINES.o200k_base; // 'js'
 */
export const DEFAULT_ENGINES: Readonly<Record<TiktokenEncodingName, EncoderEngine>> = Object.freeze({
  o200k_base: 'js',
  cl100k_base: 'js',
});

/** Options of the tiktoken counters (`exact` and `maxRun` as for tokenizer.json); every field is optional. */
export interface TiktokenCounterOptions extends TokenizerJsonCounterOptions {
  /** `js` (gpt-tokenizer's core) or `wasm` (tiktoken). @defaultValue {@link DEFAULT_ENGINES} */
  readonly engine?: EncoderEngine;
}

/**
 * A counter over a tiktoken encoding. Special-token strings such as `<|endoftext|>` are counted
 * as plain text (`encode_ordinary`), long single-class runs are split before encoding, and
 * every counter of one encoding and engine shares one loaded engine for the whole process. Every
 * call tokenizes: wrap it in {@link createCountMemo} to count repeated texts once.
 *
 * @example
 * const counter = createTiktokenCounter();
 * counter.count('hello world'); // 2
 * counter.dispose?.();
 */
export function createTiktokenCounter(
  encoding: TiktokenEncodingName = 'o200k_base',
  options: TiktokenCounterOptions = {},
): TokenCounter {
  const engine = options.engine ?? DEFAULT_ENGINES[encoding];
  checkEncoder('createTiktokenCounter', encoding, engine);
  const maxRun = options.maxRun ?? DEFAULT_MAX_RUN;
  if (!Number.isInteger(maxRun) || maxRun < 16)
    throw new ConfigError('createTiktokenCounter: maxRun must be an integer ≥ 16');
  let lease: ReturnType<typeof acquireEncoder> | undefined = acquireEncoder(encoding, engine);
  const countPiece = lease.count;
  const countText = (text: string): number => countGuarded(text, countPiece, maxRun);
  const byPiece = lease.pieces;
  // A text the long-run guard would cut is counted the plain way (its pieces are not the whole
  // text's); so is any text the piece walk declines or fails on.
  const recorded = (text: string, walk: (text: string) => PieceRecord | undefined): RecordedCount => {
    if (lease === undefined) throw new TypeError(`tiktoken:${encoding} counter used after dispose()`);
    if (text.length === 0) return { count: 0 };
    let record: PieceRecord | undefined;
    if (splitLongRuns(text, maxRun).length === 1) {
      try {
        record = walk(text);
      } catch {
        record = undefined;
      }
    }
    return record === undefined ? { count: countText(text) } : { count: record.total, record };
  };
  const pieces: RecordingCounter | undefined =
    byPiece === undefined
      ? undefined
      : {
          countRecorded: (text) => recorded(text, (t) => byPiece.record(t)),
          countDerived: (target, source, runs) => recorded(target, (t) => byPiece.derive(t, source, runs)),
        };
  return {
    name: options.exact === false ? `tiktoken:${encoding}~approx` : `tiktoken:${encoding}`,
    exact: options.exact !== false,
    // Both engines count alike (test/measure/encoder-identity.test.ts): the key names what decides a count.
    countsKey: `tiktoken:${encoding}/${maxRun}`,
    count(text: string): number {
      if (lease === undefined) throw new TypeError(`tiktoken:${encoding} counter used after dispose()`);
      if (text.length === 0) return 0;
      return countText(text);
    },
    dispose(): void {
      lease?.release();
      lease = undefined;
    },
    ...(pieces === undefined ? {} : { pieces }),
  };
}
