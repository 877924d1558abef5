/**
 * Counting a text that is mostly a copy of one already counted, exactly, without tokenizing the
 * copied part again. A BPE count is the sum of the counts of the pre-tokenizer's pieces, and a
 * piece's count depends on its string alone: the derived text is split by the real pre-tokenizer
 * (about a tenth of the work of counting), and every piece lying exactly where a piece of the
 * source did, inside a copied run, takes that piece's count; every other piece is encoded.
 * src/ledger/item-measures.ts derives an item's compact JSON from its tool output's pieces, and
 * its spaced JSON from the compact one: a tool output is tokenized once, not three times.
 */

/** Pre-tokenizer pieces of a text and their token counts. */
export interface PieceRecord {
  /** Start offset of each piece, then the text's length (one more entry than pieces). */
  readonly starts: Int32Array;
  /** Tokens of each piece. */
  readonly counts: Int32Array;
  /** Sum of `counts`: the text's token count. */
  readonly total: number;
}

/** A copied run: `target[at, at + length)` is `source[from, from + length)`. Runs ascend in both. */
export interface CopiedRun {
  readonly at: number;
  readonly from: number;
  readonly length: number;
}

/** The engine parts piece counting needs: its pre-tokenizer and its per-piece encoder. */
export interface PieceEngine {
  /** The engine's split pattern (its source and flags; piece counting matches with a sticky copy of it). */
  readonly split: RegExp;
  /** Tokens of one piece (exactly what the engine's own count adds for it). */
  countPiece(piece: string): number;
}

/** Exact counting with piece records (the JS engine has one; tiktoken's WASM does not). */
export interface PieceCounting {
  /** Count `text` (as `count` would) and record its pieces; undefined where it cannot (see {@link PieceCounting}). */
  record(text: string): PieceRecord | undefined;
  /** Count `target`, copied from the text `source` records along `runs`; undefined where it cannot. */
  derive(target: string, source: PieceRecord, runs: readonly CopiedRun[]): PieceRecord | undefined;
}

function grow(a: Int32Array<ArrayBuffer>, n: number): Int32Array<ArrayBuffer> {
  if (n < a.length) return a;
  const b = new Int32Array(Math.max(16, a.length * 2, n + 1));
  b.set(a);
  return b;
}

/**
 * Piece counting over one engine: `record` and `derive` split with the engine's pattern and give
 * the same totals as the engine's count of the whole text; `count` gives that total alone, with
 * no record (what the JS engine counts with).
 */
export function pieceCounting(engine: PieceEngine): PieceCounting & { count(text: string): number } {
  // Sticky, so a match starts exactly where the last one ended (the split must leave nothing out),
  // and matched with `test`, which makes no match array: the piece's end is `lastIndex`, and its
  // string is made only when it must be encoded (a copied piece is not). Allocating both per piece
  // was two thirds of what a gateway worker allocated per answer (`bench/_profile-alloc.ts`).
  const split = new RegExp(engine.split.source, `${engine.split.flags.replace('g', '')}y`);
  /** Where the piece starting at `at` ends. */
  const pieceEnd = (text: string, at: number): number => {
    if (!split.test(text)) throw new Error('pieces: the split pattern left text over');
    // An empty match inside the text: the split would go on past a character it did not cover.
    if (split.lastIndex === at) throw new Error('pieces: the split pattern skipped text');
    return split.lastIndex;
  };
  const walk = (text: string, reuse?: (start: number, end: number) => number): PieceRecord => {
    // About one piece per four characters of text: rarely grown.
    let starts = new Int32Array((text.length >> 2) + 16);
    let counts = new Int32Array((text.length >> 2) + 16);
    let n = 0;
    let total = 0;
    let at = 0;
    split.lastIndex = 0;
    while (at < text.length) {
      const end = pieceEnd(text, at);
      const known = reuse?.(at, end) ?? -1;
      const c = known >= 0 ? known : engine.countPiece(text.slice(at, end));
      starts = grow(starts, n + 1);
      counts = grow(counts, n);
      starts[n] = at;
      counts[n] = c;
      n++;
      total += c;
      at = end;
    }
    starts = grow(starts, n + 1);
    starts[n] = text.length;
    return { starts: starts.slice(0, n + 1), counts: counts.slice(0, n), total };
  };
  return {
    count(text) {
      let total = 0;
      split.lastIndex = 0;
      for (let at = 0; at < text.length;) {
        const end = pieceEnd(text, at);
        total += engine.countPiece(text.slice(at, end));
        at = end;
      }
      return total;
    },
    record: (text) => walk(text),
    derive(target, source, runs) {
      let r = 0;
      let j = 0;
      const last = source.counts.length;
      return walk(target, (start, end) => {
        while (r < runs.length && runs[r]!.at + runs[r]!.length <= start) r++;
        const run = runs[r];
        if (run === undefined || start < run.at || end > run.at + run.length) return -1;
        const from = start - run.at + run.from;
        while (j < last && source.starts[j]! < from) j++;
        return j < last && source.starts[j] === from && source.starts[j + 1] === from + (end - start)
          ? source.counts[j]!
          : -1;
      });
    },
  };
}

/**
 * One record of a text from the records of its consecutive parts (`parts[i]` starts at `at`):
 * each piece keeps its string's count, so the joined record is a source `derive` may copy from
 * whether or not the whole text's own split cuts where the parts meet.
 */
export function joinRecords(parts: readonly { readonly at: number; readonly record: PieceRecord }[]): PieceRecord {
  let n = 0;
  for (const p of parts) n += p.record.counts.length;
  const starts = new Int32Array(n + 1);
  const counts = new Int32Array(n);
  let k = 0;
  let total = 0;
  let end = 0;
  for (const { at, record } of parts) {
    if (at !== end) throw new RangeError(`joinRecords: a part starts at ${at}, the parts before end at ${end}`);
    const m = record.counts.length;
    for (let i = 0; i < m; i++) starts[k + i] = record.starts[i]! + at;
    counts.set(record.counts, k);
    k += m;
    total += record.total;
    end = at + record.starts[m]!;
  }
  starts[n] = end;
  return { starts, counts, total };
}
