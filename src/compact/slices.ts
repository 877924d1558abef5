/**
 * Cooperative slicing for long reductions: between slices the event loop gets a turn (timers,
 * I/O, other sessions' requests) and an abort is honoured, so a reduction stopped by its caller
 * never reaches its vault write.
 */
import { joinRecords, type PieceRecord } from '../measure/pieces.js';
import type { RecordedCount, RecordingCounter, TokenCounter } from '../measure/types.js';

/** Work per slice, in code units, for the sliced scans of large outputs. */
export const SLICE_CHARS = 32_768;
/**
 * Text per slice when counting tokens: BPE counting is the slowest pass (milliseconds per
 * kilobyte on repetitive logs), so its slices are smaller.
 */
export const COUNT_SLICE_CHARS = 8_192;

/** Give the event loop a turn (a macrotask, not a microtask), then throw if `signal` aborted. */
export function yieldSlice(signal?: AbortSignal): Promise<void> {
  signal?.throwIfAborted();
  return new Promise<void>((resolve, reject) => {
    setImmediate(() => {
      if (signal?.aborted === true) reject(signal.reason as unknown);
      else resolve();
    });
  });
}

/**
 * Cut points that split `text` into pieces of about `sliceChars`: after a newline followed by a
 * non-space character other than `/` where there is one (tiktoken's pre-tokenizers never join
 * across such a point, so the counts of the pieces add up to the count of the whole: the tests
 * check it on every captured fixture), else after any newline, else
 * hard. Returns the start of every piece after the first.
 */
export function sliceBoundaries(text: string, sliceChars = SLICE_CHARS): number[] {
  const cuts: number[] = [];
  let from = 0;
  while (text.length - from > sliceChars) {
    const target = from + sliceChars;
    let cut = -1;
    for (let i = text.indexOf('\n', target); i >= 0 && i < target + sliceChars; i = text.indexOf('\n', i + 1)) {
      const next = text.charCodeAt(i + 1);
      // Not '/': o200k's punctuation pre-token may run on through newlines into a slash.
      if (next > 32 && next !== 47 && !(next >= 0xd800 && next <= 0xdfff)) {
        cut = i + 1;
        break;
      }
    }
    if (cut < 0) {
      const nl = text.indexOf('\n', target);
      cut = nl >= 0 && nl < target + sliceChars ? nl + 1 : target;
    }
    // Never split a surrogate pair.
    const c = text.charCodeAt(cut);
    if (c >= 0xdc00 && c <= 0xdfff) cut += 1;
    if (cut >= text.length) break;
    cuts.push(cut);
    from = cut;
  }
  return cuts;
}

/** Visit the slices of `text` (`from`, `to`) in order, with a turn of the event loop after each. */
async function eachSlice(
  text: string,
  sliceChars: number,
  signal: AbortSignal | undefined,
  visit: (from: number, to: number) => void,
): Promise<void> {
  let from = 0;
  for (const cut of [...sliceBoundaries(text, sliceChars), text.length]) {
    visit(from, cut);
    from = cut;
    await yieldSlice(signal);
  }
}

/** Count `text` piece by piece with a turn of the event loop between pieces. */
export async function countInSlices(
  counter: TokenCounter,
  text: string,
  signal?: AbortSignal,
  sliceChars = COUNT_SLICE_CHARS,
): Promise<number> {
  if (text.length <= sliceChars) return counter.count(text);
  let total = 0;
  await eachSlice(text, sliceChars, signal, (from, to) => {
    total += counter.count(text.slice(from, to));
  });
  return total;
}

/**
 * {@link countInSlices} with the pieces recorded: the text's count, and its piece record when
 * every slice was tokenized by this call (a slice some memo already knew has none), so a later
 * count of a near-copy of the text (the same output as a JSON string) can be derived from it.
 */
export async function recordInSlices(
  pieces: RecordingCounter,
  text: string,
  signal?: AbortSignal,
  sliceChars = COUNT_SLICE_CHARS,
): Promise<RecordedCount> {
  if (text.length <= sliceChars) return pieces.countRecorded(text);
  let total = 0;
  let parts: { at: number; record: PieceRecord }[] | undefined = [];
  await eachSlice(text, sliceChars, signal, (from, to) => {
    const { count, record } = pieces.countRecorded(text.slice(from, to));
    total += count;
    if (record === undefined) parts = undefined;
    else parts?.push({ at: from, record });
  });
  return parts === undefined ? { count: total } : { count: total, record: joinRecords(parts) };
}
