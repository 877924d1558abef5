/**
 * Two text compactors for large tool results.
 *
 * `compactText` reproduces the reference exactly (golden vectors in its tests): ANSI stripped,
 * identical consecutive lines collapsed, then a character-based 72/28 head/tail cut that may split
 * a line. `compactLines` is the improved mode: it cuts only on line boundaries, factors runs of
 * lines that differ only in numbers, and keeps every error/warning/failure line it can afford.
 */
import { scanDiagnostics } from './diagnostic-lines.js';
import { collapseIdenticalRuns, factorRuns } from './factor.js';
import { DEFAULT_DIAGNOSTIC_CHARS, renderFaithful } from './faithful.js';
import { codePoints } from '../measure/canonical-json.js';
import { clipLine, isErrorLine, isSignalLine, splitLines, stripAnsi } from './lines.js';

export const OMITTED_MARKER = '\u2026 lines omitted \u2026';
const GAP_MARKER_COST = 26; // `… 123456 lines omitted …` plus its newline

/** Reference-compatible compaction (lengths in code points, like Python). */
export function compactText(text: string, maxChars: number): string {
  const limit = Math.max(1, Math.trunc(maxChars));
  const joined = collapseIdenticalRuns(splitLines(stripAnsi(text))).join('\n');
  const points = /[\ud800-\udfff]/.test(joined) ? Array.from(joined) : undefined;
  const length = points?.length ?? joined.length;
  const slice = (start: number, end?: number): string =>
    points === undefined ? joined.slice(start, end) : points.slice(start, end).join('');
  if (length <= limit) return joined;
  if (limit <= OMITTED_MARKER.length) return OMITTED_MARKER.slice(0, limit);
  const budget = limit - OMITTED_MARKER.length - 2;
  const headChars = Math.floor(budget * 0.72);
  const tailChars = budget - headChars;
  const head = slice(0, headChars).replace(/\n+$/, '');
  const tail = tailChars > 0 ? slice(length - tailChars).replace(/^\n+/, '') : '';
  const result = [head, OMITTED_MARKER, tail].filter((p) => p !== '').join('\n');
  return codePoints(result) <= limit ? result : Array.from(result).slice(0, limit).join('');
}

export interface CompactLinesOptions {
  /** Target size in code points. Default 8000. */
  readonly maxChars?: number;
  /** Extra lines that must be kept like error lines (e.g. summary lines). */
  readonly keep?: (line: string) => boolean;
  /** Code points for a failing text's diagnostic lines, kept verbatim beyond `maxChars` (0: off). Default 8000. */
  readonly diagnosticChars?: number;
  /** Exit status when known: non-zero makes the text a failure. */
  readonly exitCode?: number;
}

/**
 * Improved line-boundary compaction: factor runs, then head + signal lines + tail within budget.
 * A failing output keeps every diagnostic line verbatim first (up to `diagnosticChars`).
 */
export function compactLines(text: string, options: CompactLinesOptions = {}): string {
  const maxChars = Math.max(200, options.maxChars ?? 8000);
  // Longest single line kept whole; longer lines are cut in the middle.
  const maxLine = Math.max(120, Math.min(2000, Math.floor(maxChars / 4)));
  const raw = splitLines(stripAnsi(text));
  const diagnosticChars = options.diagnosticChars ?? DEFAULT_DIAGNOSTIC_CHARS;
  if (diagnosticChars > 0) {
    const scan = scanDiagnostics(raw, options.exitCode === undefined ? {} : { exitCode: options.exitCode });
    if (scan.failing && scan.lines.length > 0) {
      return renderFaithful(raw, scan.lines, {
        maxChars,
        diagnosticChars,
        ...(options.keep === undefined ? {} : { keep: options.keep }),
      });
    }
  }
  // Error lines get a longer allowance: they are what the reader needs most.
  const lines = factorRuns(raw.map((l) => clipLine(l, isSignalLine(l) ? Math.max(maxLine, 1000) : maxLine)));
  return selectLines(lines, maxChars, options.keep);
}

/**
 * Keep whole lines within `maxChars`: a head, a tail, and the signal lines between them, with a
 * `… N lines omitted …` marker for every gap. Signal lines win over head/tail lines. Lines flagged
 * in `must` are always kept and are paid from their own budget, not from `maxChars`.
 */
export function selectLines(
  lines: readonly string[],
  maxChars: number,
  keep?: (line: string) => boolean,
  must?: readonly boolean[],
): string {
  let mustChars = 0;
  if (must !== undefined)
    for (let i = 0; i < lines.length; i += 1) if (must[i] === true) mustChars += lines[i]!.length + 1 + GAP_MARKER_COST;
  const total = lines.reduce((n, l) => n + l.length + 1, -1);
  if (total <= maxChars + mustChars) return lines.join('\n');
  const important = (l: string): boolean => isSignalLine(l) || (keep?.(l) ?? false);
  const chosen = new Set<number>();
  if (must !== undefined) for (let i = 0; i < lines.length; i += 1) if (must[i] === true) chosen.add(i);
  // Head and tail are contiguous: two gap markers at most, reserved up front. Every signal line
  // taken from the middle may open one more gap, so it pays for a marker.
  let used = 2 * GAP_MARKER_COST;
  const take = (i: number, budget: number, gapCost: number): boolean => {
    if (chosen.has(i)) return true;
    const cost = lines[i]!.length + 1 + gapCost;
    if (used + cost > budget) return false;
    chosen.add(i);
    used += cost;
    return true;
  };
  const signalBudget = Math.floor(maxChars * 0.7);
  // Errors and failures first, then warnings and caller-marked lines, while the budget lasts.
  for (let i = 0; i < lines.length; i += 1) if (isErrorLine(lines[i]!)) take(i, signalBudget, GAP_MARKER_COST);
  for (let i = 0; i < lines.length; i += 1) if (important(lines[i]!)) take(i, signalBudget, GAP_MARKER_COST);
  const headBudget = used + Math.floor((maxChars - used) * 0.6);
  // Head and tail skip a line the view already shows word for word (a stack printed again, a
  // repeated banner): the room goes to lines the reader has not seen. A skip opens a gap.
  const shown = new Set<string>();
  for (const i of chosen) shown.add(lines[i]!);
  const fill = (from: number, step: 1 | -1, budget: number): void => {
    let open = false;
    for (let i = from; i >= 0 && i < lines.length; i += step) {
      const l = lines[i]!;
      if (!chosen.has(i) && l.length >= 20 && shown.has(l)) {
        open = true;
        continue;
      }
      if (!take(i, budget, open ? GAP_MARKER_COST : 0)) return;
      open = false;
      shown.add(l);
    }
  };
  fill(0, 1, headBudget);
  fill(lines.length - 1, -1, maxChars);
  const out: string[] = [];
  let gap = 0;
  for (let i = 0; i < lines.length; i += 1) {
    if (!chosen.has(i)) {
      gap += 1;
      continue;
    }
    if (gap > 0) out.push(`\u2026 ${gap} lines omitted \u2026`);
    gap = 0;
    out.push(lines[i]!);
  }
  if (gap > 0) out.push(`\u2026 ${gap} lines omitted \u2026`);
  return out.join('\n');
}
