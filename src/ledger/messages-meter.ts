/**
 * Incremental request measurement: chars and tokens of a messages array from per-message memos, so a
 * request with k new messages costs about those k. Tokens are exact: in the o200k/cl100k
 * pre-tokenizers no piece spans a `,` and the following space, so the count of `[m1, m2, …, mn]`
 * is the sum of the counts of the segments `[m1,`, ` m2,`, …, ` mn]`, each memoized per message in
 * the shared item memo (test/ledger/messages-meter.test.ts checks the equality).
 */
import { createItemMeasures, type ItemEntry, type ItemMeasures, type Segment } from './item-measures.js';
import type { TokenCounter } from '../measure/types.js';

/**
 * The measurements of one message ({@link MessagesMeter.entry}): canonicalJson(message) as `json`
 * (Python-compatible, default separators), its code points, and its tokens as each {@link Segment}
 * once counted.
 */
export type MessageEntry = Pick<ItemEntry, 'chars' | Segment> & { readonly json: string };

/** Incremental chars/tokens for messages arrays (see the module comment). */
export interface MessagesMeter {
  readonly counter: TokenCounter;
  /** The measurements of one message (serializes it on first sight). */
  entry(message: unknown): MessageEntry;
  /** Code points of canonicalJson(messages). */
  chars(messages: readonly unknown[]): number;
  /** Tokens of canonicalJson(messages), exact for BPE counters (see the module comment). */
  tokens(messages: readonly unknown[]): number;
  /** Tokens of canonicalJson(message) alone. */
  aloneTokens(message: unknown): number;
  /** Tokens of the message as a middle element (` json,`): its share of an array, reused by attribution. */
  midTokens(message: unknown): number;
}

/** Options of {@link createMessagesMeter}; every field is optional. */
export interface MessagesMeterOptions {
  /**
   * The per-item measurement memo to read, shared with the request stages (the runtime's); it must
   * count with the same tokenizer as the meter's counter. Ignored when it has no counter. Built with
   * `recordPieces: true`, its spaced segments are derived from the compact JSON the stages counted
   * (same figures either way, fewer pieces encoded).
   *
   * @defaultValue none: the meter's own, by message object
   */
  readonly measures?: ItemMeasures;
}

/**
 * Build a meter over a counter. Measurements are held by message object (weakly, so a finished
 * session's messages are collected with it) in the meter's own memo, or in the shared one given.
 *
 * @example
 * const meter = createMessagesMeter(createTiktokenCounter());
 * meter.tokens(request.messages) === counter.count(canonicalJson(request.messages)); // true
 */
export function createMessagesMeter(counter: TokenCounter, options: MessagesMeterOptions = {}): MessagesMeter {
  const measures =
    options.measures?.counter !== undefined ? options.measures : createItemMeasures({ counter, byContent: false });
  const tokens = (message: unknown, segment: Segment): number => measures.segmentTokens(message, segment)!;
  // The shared entry's counts are read live through the prototype; the spaced JSON is made on demand.
  const entry = (message: unknown): MessageEntry =>
    Object.create(measures.entry(message), { json: { get: () => measures.spacedJson(message) } }) as MessageEntry;
  return {
    counter,
    entry,
    chars(messages) {
      if (messages.length === 0) return 2;
      let total = 2 + 2 * (messages.length - 1);
      for (const m of messages) total += measures.entry(m).chars;
      return total;
    },
    tokens(messages) {
      const n = messages.length;
      if (n === 0) return counter.count('[]');
      if (n === 1) return tokens(messages[0], 'only');
      let total = 0;
      for (let i = 0; i < n; i++) total += tokens(messages[i], i === 0 ? 'first' : i === n - 1 ? 'last' : 'mid');
      return total;
    },
    aloneTokens: (message) => tokens(message, 'alone'),
    midTokens: (message) => tokens(message, 'mid'),
  };
}
