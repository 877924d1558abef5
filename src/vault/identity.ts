/**
 * Content identity and the vault's text helpers (code points, case folding). Ids are over UTF-8 bytes;
 * a lone surrogate has no exact UTF-8 form, so `put` refuses such content (VaultContentError) rather
 * than break exact recovery, and callers keep it inline.
 */
import { codePoints } from '../measure/canonical-json.js';
import { createHash } from 'node:crypto';

/**
 * Hex SHA-256 of the UTF-8 bytes of `content` (lone surrogates encode as U+FFFD, as in Buffer).
 *
 * @example
 * sha256Hex('') // 'e3b0c442…b855'
 */
export function sha256Hex(content: string): string {
  return createHash('sha256').update(content, 'utf8').digest('hex');
}

/**
 * Short artifact id for content: `a_` + first 32 hex chars of its SHA-256.
 *
 * @example
 * const id = artifactIdFor(output); // 'a_' + 32 hex chars
 */
export function artifactIdFor(content: string): string {
  return shortIdForSha(sha256Hex(content));
}

export function shortIdForSha(sha256: string): string {
  return `a_${sha256.slice(0, 32)}`;
}

export function longIdForSha(sha256: string): string {
  return `a_${sha256}`;
}

/** True when the id is one of the two ids content with this digest may have. */
export function idMatchesSha(artifactId: string, sha256: string): boolean {
  return artifactId === shortIdForSha(sha256) || artifactId === longIdForSha(sha256);
}

/**
 * Whether `content`, stored under digest `sha256`, is exact: equal to the caller's `known` content
 * with the same digest (equal content hashes alike, so compare, not hash), else hashing to it.
 */
export function isExactContent(content: string, sha256: string, known?: { content: string; sha256: string }): boolean {
  return known === undefined ? sha256Hex(content) === sha256 : known.sha256 === sha256 && known.content === content;
}

const wellFormed = (String.prototype as { isWellFormed?: () => boolean }).isWellFormed;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/u;

/** False when the string contains a lone surrogate (and so has no exact UTF-8 form). */
export function isWellFormedText(s: string): boolean {
  return wellFormed !== undefined ? wellFormed.call(s) : !LONE_SURROGATE.test(s);
}

/** UTF-16 index of code point `cp` (clamped to the string end). */
function indexOfCodePoint(s: string, from: number, fromCp: number, cp: number): number {
  let i = from;
  for (let k = fromCp; k < cp && i < s.length; k++) {
    const c = s.charCodeAt(i);
    i += c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00 ? 2 : 1;
  }
  return i;
}

/**
 * The code points [offset, offset + count) of `s`. `totalCp` is `codePoints(s)`; when it equals
 * the UTF-16 length there are no pairs and a plain slice is exact.
 */
export function sliceCodePoints(s: string, offset: number, count: number, totalCp: number): string {
  if (totalCp === s.length) return s.slice(offset, offset + count);
  const start = indexOfCodePoint(s, 0, 0, offset);
  const end = indexOfCodePoint(s, start, offset, offset + count);
  return s.slice(start, end);
}

/** Clip to `max` code points, marking the cut with an ellipsis. */
export function clipCodePoints(s: string, max: number): string {
  const n = codePoints(s);
  if (n <= max) return s;
  return `${sliceCodePoints(s, 0, max - 1, n)}\u2026`;
}

/**
 * Unicode case folding close to Python's `str.casefold()`: upper- then lower-casing expands `ß` to
 * `ss` (so `ÜBERGRÖSSE` finds `Übergröße`), and final sigma folds to `σ` so the result does not
 * depend on word position. Used identically for indexing and for queries.
 */
export function foldCase(s: string): string {
  const folded = s.toUpperCase().toLowerCase();
  return folded.includes('\u03c2') ? folded.replace(/\u03c2/g, '\u03c3') : folded;
}
