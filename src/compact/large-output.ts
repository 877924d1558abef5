/**
 * Large outputs are reduced to a bounded excerpt before any compactor sees them, in slices: the
 * first and last {@link WINDOW_CHARS} on line boundaries, and from the middle only its diagnostic
 * and error lines (up to a budget), with `… N lines omitted …` markers between. Compacting the
 * excerpt costs the same whatever the output's size, and a view made from it keeps what a reader
 * of a failure needs: the start, the end (where runners print their summaries) and every
 * diagnostic line that fits.
 */
import { scanDiagnostics } from './diagnostic-lines.js';
import { isErrorLine, splitLines, stripAnsi } from './lines.js';
import { SLICE_CHARS, yieldSlice } from './slices.js';

/** Outputs longer than this (code units) are excerpted before they are compacted. */
export const LARGE_OUTPUT_CHARS = 131_072;
/** Size of the head and of the tail window. */
export const WINDOW_CHARS = 32_768;
/** Budget, in code units, for the lines kept from the middle. */
const MIDDLE_CHARS = 16_000;

export interface Excerpt {
  /** Head, the middle's diagnostic lines with gap markers, and tail. */
  readonly text: string;
  /** Lines of the middle that were left out. */
  readonly omittedLines: number;
  /** Whether the middle was read at all (it is not beyond the artifact ceiling). */
  readonly middleScanned: boolean;
}

export interface ExcerptOptions {
  /** Read the middle for diagnostic lines. Default true. */
  readonly scanMiddle?: boolean;
  readonly signal?: AbortSignal;
}

/** A line boundary at or after `at` (within a window's length), else `at` itself. */
function boundaryAfter(text: string, at: number): number {
  const nl = text.indexOf('\n', at);
  return nl >= 0 && nl - at < WINDOW_CHARS ? nl + 1 : at;
}

/** The bounded excerpt of `text`, built in slices (yielding and honouring `signal` between them). */
export async function excerptLargeOutput(text: string, options: ExcerptOptions = {}): Promise<Excerpt> {
  const headEnd = boundaryAfter(text, WINDOW_CHARS);
  const tailStart = Math.max(headEnd, boundaryAfter(text, text.length - WINDOW_CHARS));
  const head = text.slice(0, headEnd).replace(/\n$/, '');
  const tail = text.slice(tailStart);
  const out: string[] = [head];
  let omitted = 0;
  let omittedTotal = 0;
  let used = 0;
  const gap = (): void => {
    if (omitted > 0) out.push(`\u2026 ${omitted} lines omitted \u2026`);
    omittedTotal += omitted;
    omitted = 0;
  };
  if (options.scanMiddle ?? true) {
    for (let from = headEnd; from < tailStart;) {
      const to = Math.min(tailStart, boundaryAfter(text, from + SLICE_CHARS));
      const lines = splitLines(stripAnsi(text.slice(from, to)));
      const flagged = new Set(scanDiagnostics(lines).lines);
      for (let i = 0; i < lines.length; i += 1) {
        const line = lines[i]!;
        if ((flagged.has(i) || isErrorLine(line)) && used + line.length < MIDDLE_CHARS) {
          gap();
          out.push(line);
          used += line.length + 1;
        } else omitted += 1;
      }
      from = to;
      await yieldSlice(options.signal);
    }
    gap();
  } else if (tailStart > headEnd) {
    out.push(`\u2026 ${tailStart - headEnd} chars omitted \u2026`);
  }
  out.push(tail);
  return { text: out.join('\n'), omittedLines: omittedTotal, middleScanned: options.scanMiddle ?? true };
}
