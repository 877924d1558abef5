/**
 * Incremental request measurement: chars and tokens of a messages array from per-message memos.
 *
 * A request of N messages of which k are new costs O(size of the k new ones): each message object
 * is serialized and tokenized once (memo keyed by object identity, so hosts and operators that
 * share unchanged messages get lookups).
 *
 * Tokens are exact, not estimated: the canonical JSON of an array is `[m1, m2, …, mn]`, and in the
 * o200k/cl100k pre-tokenizers a piece never spans the boundary between `,` and the following
 * space (punctuation runs stop at whitespace, and a piece starting at the space is ` {"…`). So
 * the count of the whole string equals the sum of the counts of the segments `[m1,`, ` m2,`, …,
 * ` mn]`, and each segment is memoized per message (test/telemetry/meter.test.ts checks the
 * equality against counting the whole string).
 */
import { canonicalOf } from '../compile/prefix.js';
import { canonicalJson, codePoints } from '../measure/index.js';
import type { TokenCounter } from '../measure/types.js';
import { WeakMemo } from '../weak-memo.js';

/**
 * The memoized measurements of one message. Its JSON text is kept only until the message's
 * middle-segment count is known (the count every later request reuses): a long conversation's
 * entries then hold numbers, not a second copy of the conversation. Asked for again (a first/last
 * segment, a prefix comparison), the text is serialized again from the message the entry belongs to.
 */
class Entry {
  #json: string | undefined;
  readonly #source: unknown;
  /** Code points of `json`. */
  readonly chars: number;
  /** Tokens of ` json,` (a middle segment), computed on first use. */
  mid?: number;
  /** Tokens of `[json,` (first of several). */
  first?: number;
  /** Tokens of ` json]` (last of several). */
  last?: number;
  /** Tokens of `[json]` (the only message). */
  only?: number;
  /** Tokens of `json` alone (attribution buckets). */
  alone?: number;

  constructor(source: unknown, json: string) {
    this.#source = source;
    this.#json = json;
    this.chars = codePoints(json);
  }

  /** canonicalJson(message) (Python-compatible, default separators). */
  get json(): string {
    return this.#json ?? canonicalJson(this.#source);
  }

  /** Tokens of ` json,`, counted once; the JSON text is let go then. */
  midTokens(counter: TokenCounter): number {
    if (this.mid === undefined) {
      this.mid = counter.count(` ${this.json},`);
      this.#json = undefined;
    }
    return this.mid;
  }
}

/** The memoized measurements of one message (see {@link MessagesMeter.entry}). */
export type MessageEntry = Omit<Entry, 'midTokens'>;

/** Incremental chars/tokens for messages arrays (see the module comment). */
export interface MessagesMeter {
  readonly counter: TokenCounter;
  /** The memo entry of one message (serializes it on first sight). */
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

/**
 * Build a meter over a counter. Memo entries are held weakly by message object, so a finished
 * session's messages are collected with it.
 *
 * @example
 * const meter = createMessagesMeter(createTiktokenCounter());
 * meter.tokens(request.messages) === counter.count(canonicalJson(request.messages)); // true
 */
export function createMessagesMeter(counter: TokenCounter): MessagesMeter {
  const memo = new WeakMemo<object, Entry>();
  const entry = (message: unknown): Entry => {
    if (typeof message === 'object' && message !== null) {
      // A rebuilt copy the request stages recognised as an earlier object shares that object's entry.
      const key = canonicalOf(message);
      const found = memo.get(key);
      if (found !== undefined) return found;
      const made = new Entry(key, canonicalJson(message));
      memo.set(key, made);
      return made;
    }
    return new Entry(message, canonicalJson(message));
  };
  return {
    counter,
    entry,
    chars(messages) {
      if (messages.length === 0) return 2;
      let total = 2 + 2 * (messages.length - 1);
      for (const m of messages) total += entry(m).chars;
      return total;
    },
    tokens(messages) {
      const n = messages.length;
      if (n === 0) return counter.count('[]');
      if (n === 1) {
        const e = entry(messages[0]);
        return (e.only ??= counter.count(`[${e.json}]`));
      }
      let total = 0;
      for (let i = 0; i < n; i++) {
        const e = entry(messages[i]);
        if (i === 0) total += e.first ??= counter.count(`[${e.json},`);
        else if (i === n - 1) total += e.last ??= counter.count(` ${e.json}]`);
        else total += e.midTokens(counter);
      }
      return total;
    },
    aloneTokens(message) {
      const e = entry(message);
      return (e.alone ??= counter.count(e.json));
    },
    midTokens(message) {
      return entry(message).midTokens(counter);
    },
  };
}
