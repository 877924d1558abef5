/**
 * Line diffs for temporal deltas (the `diff` package's structuredPatch), with a cheap lower bound
 * so hopeless diffs are never computed: every line of the new output that the old output lacks
 * must appear as a `+` line, so their total length bounds the diff from below.
 */
import { structuredPatch } from 'diff';
import { splitLines } from './lines.js';

/**
 * Unified diff (3 context lines, no line terminators, no "no newline" noise) of two outputs,
 * starting with `\n`; '' when no line differs; undefined when it cannot be shorter than
 * `limitChars` or is too expensive to compute.
 */
export function unifiedLineDiff(
  before: string,
  after: string,
  oldLabel: string,
  newLabel: string,
  limitChars: number,
): string | undefined {
  const a = splitLines(before);
  const b = splitLines(after);
  const available = new Map<string, number>();
  for (const line of a) available.set(line, (available.get(line) ?? 0) + 1);
  let floor = 0;
  for (const line of b) {
    const n = available.get(line) ?? 0;
    if (n > 0) available.set(line, n - 1);
    else floor += line.length + 2;
    if (floor >= limitChars) return undefined;
  }
  const patch = structuredPatch(
    oldLabel,
    newLabel,
    a.map((l) => `${l}\n`).join(''),
    b.map((l) => `${l}\n`).join(''),
    '',
    '',
    {
      context: 3,
      maxEditLength: 4000,
      timeout: 250,
    },
  );
  if (patch === undefined) return undefined;
  if (patch.hunks.length === 0) return '';
  const lines = [`--- ${oldLabel}`, `+++ ${newLabel}`];
  for (const h of patch.hunks) {
    lines.push(
      `@@ -${h.oldStart},${h.oldLines} +${h.newStart},${h.newLines} @@`,
      ...h.lines.map((l) => l.replace(/\n$/, '')),
    );
  }
  return `\n${lines.join('\n')}`;
}
