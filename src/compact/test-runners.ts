/**
 * Test-runner output (vitest/jest, pytest, cargo test, go test, mvn/gradle; their rules in
 * src/runners/): passing noise is
 * dropped and counted, failures, error excerpts and the summary are kept; long failure blocks are
 * cut to their first lines so one huge traceback cannot crowd out the others.
 */
import { selectLines } from './compact-text.js';
import { factorRuns } from './factor.js';
import { renderFaithful } from './faithful.js';
import { clipLine, splitLines, stripAnsi } from './lines.js';
import { RUNNERS, type TestRunner } from '../runners/index.js';

/** Lines kept from one failure block before it is cut. */
const BLOCK_LINES = 30;

/** What a failing output must keep: its diagnostic lines (indices into its lines) and their budget. */
export interface FailureView {
  readonly flagged: readonly number[];
  readonly diagnosticChars: number;
}

/**
 * Compact one runner's output; undefined when nothing would be dropped (not this runner's shape).
 * With `failure`, the diagnostic lines are never dropped as noise nor cut from a failure block,
 * and they are kept verbatim within their budget.
 */
export function compactTestOutput(
  text: string,
  runner: TestRunner,
  maxChars = 8000,
  failure?: FailureView,
): string | undefined {
  const rules = RUNNERS[runner];
  const lines = splitLines(stripAnsi(text));
  const flagged = new Set(failure?.flagged);
  const kept: string[] = [];
  const keptFlagged: number[] = [];
  let dropped = 0;
  let blockLines = -1;
  let blockCut = 0;
  const closeBlock = (): void => {
    if (blockCut > 0) kept.push(`\u2026 ${blockCut} more lines of this failure \u2026`);
    blockCut = 0;
  };
  for (let i = 0; i < lines.length; i += 1) {
    const raw = lines[i]!;
    if (flagged.has(i)) {
      closeBlock();
      if (rules.block.test(raw)) blockLines = 0;
      else if (rules.summary.test(raw)) blockLines = -1;
      keptFlagged.push(kept.length);
      kept.push(raw);
      continue;
    }
    const line = clipLine(raw, 500);
    if (rules.noise.some((re) => re.test(line))) {
      dropped += 1;
      continue;
    }
    if (rules.block.test(line) || rules.summary.test(line) || /^[=⎯-]{5,}/.test(line.trim())) {
      closeBlock();
      blockLines = rules.block.test(line) ? 0 : -1;
      kept.push(line);
      continue;
    }
    if (blockLines >= 0 && ++blockLines > BLOCK_LINES) {
      blockCut += 1;
      continue;
    }
    kept.push(line);
  }
  closeBlock();
  if (dropped === 0 && kept.length === lines.length) return undefined;
  const keep = (l: string): boolean => rules.summary.test(l) || rules.block.test(l);
  const body =
    failure === undefined
      ? selectLines(factorRuns(kept), maxChars, keep)
      : renderFaithful(kept, keptFlagged, { maxChars, diagnosticChars: failure.diagnosticChars, keep });
  return `[${runner}: ${dropped} passing/progress lines dropped]\n${body}`;
}
