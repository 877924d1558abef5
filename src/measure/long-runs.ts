/**
 * Guard against BPE's quadratic cost on one long pre-token (256 K of "a" in one piece
 * takes a minute in tiktoken). The pre-tokenizers of o200k/cl100k/byte-level BPE keep a run of
 * letters, or a run of whitespace and punctuation, as one piece; we cut such runs every
 * `maxRun` code units and count the pieces separately. A cut only changes the count at the cut
 * (a token or two per `maxRun` chars of a pathological run); ordinary text is never cut.
 */

/** Default longest run handed to an encoder in one piece. */
export const DEFAULT_MAX_RUN = 1024;

const enum Kind {
  Word = 0,
  Gap = 1,
  Number = 2,
}

// Lazily filled classification of BPE code units: 0 unknown, 1 + Kind otherwise.
const table = new Uint8Array(0x10000);
const LETTER = /[\p{L}\p{M}]/u;
const NUMBER = /\p{N}/u;
const kindOf = (ch: string): Kind => (LETTER.test(ch) ? Kind.Word : NUMBER.test(ch) ? Kind.Number : Kind.Gap);

function kindOfUnit(c: number): Kind {
  const cached = table[c];
  if (cached !== undefined && cached !== 0) return (cached - 1) as Kind;
  // A surrogate (half of an astral character) is resolved by the caller.
  const kind = c >= 0xd800 && c <= 0xdfff ? Kind.Word : kindOf(String.fromCharCode(c));
  table[c] = kind + 1;
  return kind;
}

function kindAt(text: string, i: number): Kind {
  const c = text.charCodeAt(i);
  if (c < 0xd800 || c > 0xdbff) return kindOfUnit(c);
  const cp = text.codePointAt(i) ?? c;
  return cp < 0x10000 ? Kind.Word : kindOf(String.fromCodePoint(cp));
}

/**
 * Split `text` so that no run of one class is longer than `maxRun` code units. Returns `[text]`
 * when nothing needs cutting (the common case, no allocation beyond the array).
 *
 * @example
 * import { splitLongRuns } from 'token-terminator';
 * splitLongRuns('short text'); // ['short text']
 * splitLongRuns('a'.repeat(10), 4).every((piece) => piece.length <= 4); // true
 */
export function splitLongRuns(text: string, maxRun: number = DEFAULT_MAX_RUN): string[] {
  if (text.length <= maxRun) return [text];
  if (!mayHaveLongRun(text, maxRun)) return [text];
  return cutLongRuns(text, maxRun);
}

const SURROGATE = /[\uD800-\uDFFF]/;

/**
 * False only when no run of one class (letters, or gaps; a digit never runs) is longer than
 * `maxRun` code units, without classifying every unit. Such a run spans more than
 * 2 × ⌊maxRun / 2⌋ units, so it holds two consecutive multiples of that stride: only where two
 * consecutive samples share a class is the run around them measured. A text with surrogates is
 * left to the exact walk (its classes need code points).
 */
function mayHaveLongRun(text: string, maxRun: number): boolean {
  const stride = Math.floor(maxRun / 2);
  if (!(stride >= 1) || SURROGATE.test(text)) return true;
  let before = kindOfUnit(text.charCodeAt(0));
  for (let p = stride; p < text.length; p += stride) {
    const kind = kindOfUnit(text.charCodeAt(p));
    if (kind === before && kind !== Kind.Number) {
      // The run through p, measured up to one unit past the bound.
      let from = p;
      let to = p + 1;
      while (from > 0 && to - from <= maxRun && kindOfUnit(text.charCodeAt(from - 1)) === kind) from--;
      while (to < text.length && to - from <= maxRun && kindOfUnit(text.charCodeAt(to)) === kind) to++;
      if (to - from > maxRun) return true;
    }
    before = kind;
  }
  return false;
}

/** The exact walk of {@link splitLongRuns}. */
function cutLongRuns(text: string, maxRun: number): string[] {
  const pieces: string[] = [];
  let start = 0;
  let runKind: Kind | -1 = -1;
  let runLength = 0;
  for (let i = 0; i < text.length; i++) {
    const kind = kindAt(text, i);
    if (kind !== runKind || kind === Kind.Number) {
      runKind = kind;
      runLength = 0;
    }
    runLength++;
    if (runLength > maxRun) {
      // Never cut between the halves of a surrogate pair.
      const cut = isLowSurrogate(text.charCodeAt(i)) ? i - 1 : i;
      if (cut > start) {
        pieces.push(text.slice(start, cut));
        start = cut;
      }
      runLength = i - cut + 1;
    }
    if (isHighSurrogate(text.charCodeAt(i)) && isLowSurrogate(text.charCodeAt(i + 1))) i++;
  }
  if (start === 0) return [text];
  pieces.push(text.slice(start));
  return pieces;
}

function isHighSurrogate(c: number): boolean {
  return c >= 0xd800 && c <= 0xdbff;
}

function isLowSurrogate(c: number): boolean {
  return c >= 0xdc00 && c <= 0xdfff;
}

/**
 * Count with `encodeLength` piece by piece. Identical pieces (a run of one repeated character
 * yields many) are counted once per call.
 *
 * @example
 * import { countGuarded } from 'token-terminator';
 * import { encode } from 'gpt-tokenizer';
 * const tokens = countGuarded('=' .repeat(100_000), (piece) => encode(piece).length);
 */
export function countGuarded(
  text: string,
  encodeLength: (piece: string) => number,
  maxRun: number = DEFAULT_MAX_RUN,
): number {
  const pieces = splitLongRuns(text, maxRun);
  if (pieces.length === 1) return encodeLength(text);
  const seen = new Map<string, number>();
  let total = 0;
  for (const piece of pieces) {
    let n = seen.get(piece);
    if (n === undefined) {
      n = encodeLength(piece);
      seen.set(piece, n);
    }
    total += n;
  }
  return total;
}
