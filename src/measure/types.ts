import type { CopiedRun, PieceRecord } from './pieces.js';

/** Counts tokens for text. Implementations: tiktoken encodings, tokenizer.json, rough estimate, vLLM /tokenize. */
export interface TokenCounter {
  /** Stable, non-sensitive label, e.g. `tiktoken:o200k_base`, `tokenizer-json`, `rough`. */
  readonly name: string;
  /** True when counts are exact for the route (not an estimate). */
  readonly exact: boolean;
  /**
   * Identity of the counts: two counters with the same key give every text the same count (same
   * vocabulary, same guard for long runs), so counts one made may be read for the other, in this
   * process or another (the vault's count store). Absent: counts are never shared.
   *
   * @defaultValue `tiktoken:<encoding>/<maxRun>` on the tiktoken counters, absent elsewhere
   */
  readonly countsKey?: string;
  /**
   * Token count of plain text. Special-token strings are counted as plain text. `key`, when the
   * caller has one, is a memo key that names exactly `text` (`contentKey` of it, or
   * `digestKey` of its ledger digest): a counter with a memo looks it up instead of hashing
   * the text again; other counters ignore it.
   */
  count(text: string, key?: string): number;
  /** Release native resources (WASM encoders). */
  dispose?(): void;
  /**
   * Counting that records the pre-tokenizer's pieces, so a near-copy of a counted text (the same
   * JSON with other separators) is counted exactly without encoding the copied part again.
   *
   * @defaultValue present on the `js` tiktoken counters, absent elsewhere
   */
  readonly pieces?: RecordingCounter;
}

/** A count, with the text's piece record when it was tokenized by this call (not found in a memo). */
export interface RecordedCount {
  readonly count: number;
  readonly record?: PieceRecord;
}

/** See {@link TokenCounter.pieces}; every result equals `count(text)` of the same counter. */
export interface RecordingCounter {
  /** `count(text, key)`, with its pieces when tokenized now. */
  countRecorded(text: string, key?: string): RecordedCount;
  /** `count(target, key)`, where `target` copies the text `source` records along `runs`. */
  countDerived(target: string, source: PieceRecord, runs: readonly CopiedRun[], key?: string): RecordedCount;
}
