import { get_encoding, type Tiktoken } from 'tiktoken';
import type { TokenCounter } from './types.js';
import { countGuarded, DEFAULT_MAX_RUN } from './long-runs.js';

/** Encodings this library counts with (the two current OpenAI chat encodings). */
export type TiktokenEncodingName = 'o200k_base' | 'cl100k_base';

export const TIKTOKEN_ENCODINGS: readonly TiktokenEncodingName[] = ['o200k_base', 'cl100k_base'];

export interface TiktokenCounterOptions {
  /** Whether counts are exact for the route this counter serves. Default true. */
  readonly exact?: boolean;
  /** Longest same-class run encoded in one piece (pathological-input guard). Default 1024. */
  readonly maxRun?: number;
}

// One WASM encoder per encoding for the whole process: `get_encoding` costs ~0.2 s and several
// MB, so counters share it and the last dispose() frees it.
const shared = new Map<TiktokenEncodingName, { encoder: Tiktoken; refs: number }>();

function acquire(encoding: TiktokenEncodingName): Tiktoken {
  let entry = shared.get(encoding);
  if (entry === undefined) {
    entry = { encoder: get_encoding(encoding), refs: 0 };
    shared.set(encoding, entry);
  }
  entry.refs++;
  return entry.encoder;
}

function release(encoding: TiktokenEncodingName): void {
  const entry = shared.get(encoding);
  if (entry === undefined) return;
  entry.refs--;
  if (entry.refs <= 0) {
    shared.delete(encoding);
    entry.encoder.free();
  }
}

/** True when `name` is an encoding this module can load. */
export function isTiktokenEncoding(name: string): name is TiktokenEncodingName {
  return (TIKTOKEN_ENCODINGS as readonly string[]).includes(name);
}

/**
 * A counter over a tiktoken (WASM) encoding. Special-token strings such as `<|endoftext|>` are
 * counted as plain text (`encode_ordinary`), and long single-class runs are split before encoding.
 *
 * @example
 * const counter = createTiktokenCounter();
 * counter.count('hello world'); // 2
 * counter.dispose?.();
 */
export function createTiktokenCounter(encoding: TiktokenEncodingName = 'o200k_base', options: TiktokenCounterOptions = {}): TokenCounter {
  if (!isTiktokenEncoding(encoding)) {
    throw new TypeError(`createTiktokenCounter: unknown encoding "${String(encoding)}" (accepted: ${TIKTOKEN_ENCODINGS.join(', ')})`);
  }
  const maxRun = options.maxRun ?? DEFAULT_MAX_RUN;
  if (!Number.isInteger(maxRun) || maxRun < 16) throw new TypeError('createTiktokenCounter: maxRun must be an integer ≥ 16');
  let encoder: Tiktoken | undefined = acquire(encoding);
  const encodeLength = (piece: string): number => {
    if (encoder === undefined) throw new TypeError(`tiktoken:${encoding} counter used after dispose()`);
    return encoder.encode_ordinary(piece).length;
  };
  return {
    name: options.exact === false ? `tiktoken:${encoding}~approx` : `tiktoken:${encoding}`,
    exact: options.exact !== false,
    count(text: string): number {
      return text.length === 0 ? 0 : countGuarded(text, encodeLength, maxRun);
    },
    dispose(): void {
      if (encoder === undefined) return;
      encoder = undefined;
      release(encoding);
    },
  };
}
