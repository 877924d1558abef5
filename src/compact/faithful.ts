/**
 * Faithful views of failing outputs: the diagnostic lines (src/compact/diagnostic-lines.ts) stay
 * verbatim and in order, paid from a budget of their own; the rest of the output is compacted as
 * usual around them (runs factored, head and tail kept within what is left of `maxChars`).
 */
import { selectLines } from './compact-text.js';
import { factorRuns } from './factor.js';
import { clipLine, isSignalLine } from './lines.js';

/** Default budget, in code points, for the diagnostic lines of one view. */
export const DEFAULT_DIAGNOSTIC_CHARS = 8000;
/** Longest line kept verbatim as a diagnostic; a longer one is clipped like any other line. */
export const MAX_DIAGNOSTIC_LINE = 2000;

export interface Pinned {
  /** Indices (ascending) of the diagnostic lines that fit the budget. */
  readonly chosen: ReadonlySet<number>;
  /** Diagnostic lines left out because the budget ran out. */
  readonly over: number;
  /** Characters the chosen lines take. */
  readonly chars: number;
}

/**
 * Which diagnostic lines fit `budget`. The last quarter of the budget goes to the last lines (the
 * summaries runners print at the end), the rest to the first ones in order, so a cut never leaves
 * a hole in the middle of the first failures.
 */
export function choosePinned(lines: readonly string[], flagged: readonly number[], budget: number): Pinned {
  const candidates = flagged.filter((i) => lines[i]!.length <= MAX_DIAGNOSTIC_LINE);
  const chosen = new Set<number>();
  let chars = 0;
  const cost = (i: number): number => lines[i]!.length + 1;
  for (let k = candidates.length - 1; k >= 0; k -= 1) {
    const i = candidates[k]!;
    if (chars + cost(i) > budget / 4) break;
    chosen.add(i);
    chars += cost(i);
  }
  for (const i of candidates) {
    if (chosen.has(i)) continue;
    if (chars + cost(i) > budget) break;
    chosen.add(i);
    chars += cost(i);
  }
  return { chosen, over: flagged.length - chosen.size, chars };
}

export interface FaithfulOptions {
  /** Size target for everything that is not a kept diagnostic line. */
  readonly maxChars: number;
  /** Budget for the diagnostic lines kept verbatim. */
  readonly diagnosticChars: number;
  /** Lines worth keeping beside the diagnostics when the budget allows (summaries, block headers). */
  readonly keep?: (line: string) => boolean;
}

// Stack frames of JVM, Node and Rust traces (`at …`, `N: …`, `... N more`): the ones that are not
// diagnostic lines (library frames) are elided in runs, so they never crowd the view.
const FRAME = /^\s+(?:at \S|\d+: \S|\.\.\. \d+ more$)/;

/** The faithful view of `lines`, where `flagged` are the diagnostic lines' indices. */
export function renderFaithful(lines: readonly string[], flagged: readonly number[], options: FaithfulOptions): string {
  const pinned = choosePinned(lines, flagged, options.diagnosticChars);
  // Longest non-diagnostic line kept whole.
  const maxLine = Math.max(120, Math.min(2000, Math.floor(options.maxChars / 4)));
  const out: string[] = [];
  const must: boolean[] = [];
  let run: string[] = [];
  let frames = 0;
  const flushFrames = (): void => {
    if (frames > 0) run.push(`\u2026 ${frames} stack frame line${frames === 1 ? '' : 's'} omitted \u2026`);
    frames = 0;
  };
  const flush = (): void => {
    flushFrames();
    for (const line of factorRuns(run)) {
      out.push(line);
      must.push(false);
    }
    run = [];
  };
  for (let i = 0; i < lines.length; i += 1) {
    const line = lines[i]!;
    if (pinned.chosen.has(i)) {
      flush();
      out.push(line);
      must.push(true);
    } else if (FRAME.test(line)) {
      frames += 1;
    } else {
      flushFrames();
      run.push(clipLine(line, isSignalLine(line) ? Math.max(maxLine, 1000) : maxLine));
    }
  }
  flush();
  // On a failure the diagnostics are the view: the filler around them shrinks as they grow.
  const rest = Math.max(Math.floor(options.maxChars / 4), options.maxChars - pinned.chars);
  const body = selectLines(out, rest, options.keep, must);
  return pinned.over > 0 ? `${body}\n\u2026 ${pinned.over} more diagnostic lines over the view's budget \u2026` : body;
}
