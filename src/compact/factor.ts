/**
 * Run factoring: consecutive identical lines become one line with a count (reference format
 * `line  [repeated ×n]`), and long runs of lines that differ only in their numbers become the
 * first line, one template line naming the count and the range of every varying number, and the
 * last line. Nothing is lost for good: the exact text is always in the vault.
 */
import { lineNumbers, lineShape } from './lines.js';

/** Shortest run of same-shape (numbers-only-differ) lines that is factored. */
const MIN_RUN = 5;

/** Reference collapse of one run of identical lines. */
export function collapseIdentical(line: string, count: number): string[] {
  if (count === 1) return [line];
  if (count === 2) return [line, line];
  return [`${line}  [repeated \u00d7${count}]`];
}

/** Collapse identical runs and factor numbers-only-differ runs. */
export function factorRuns(lines: readonly string[]): string[] {
  const out: string[] = [];
  let i = 0;
  while (i < lines.length) {
    const first = lines[i]!;
    const shape = lineShape(first);
    let j = i + 1;
    while (j < lines.length && lineShape(lines[j]!) === shape) j += 1;
    const run = lines.slice(i, j);
    if (run.length >= MIN_RUN && shape !== first && !allEqual(run)) {
      out.push(first, templateLine(run.slice(1, -1)), run[run.length - 1]!);
    } else {
      out.push(...collapseIdenticalRuns(run));
    }
    i = j;
  }
  return out;
}

/** Collapse only consecutive identical lines (the reference behaviour). */
export function collapseIdenticalRuns(lines: readonly string[]): string[] {
  const out: string[] = [];
  let i = 0;
  while (i < lines.length) {
    let j = i + 1;
    while (j < lines.length && lines[j] === lines[i]) j += 1;
    out.push(...collapseIdentical(lines[i]!, j - i));
    i = j;
  }
  return out;
}

function allEqual(run: readonly string[]): boolean {
  return run.every((line) => line === run[0]);
}

/** `… ×N more lines of the form "text {min..max} text" …` for the omitted middle of a run. */
export function templateLine(middle: readonly string[]): string {
  return `\u2026 \u00d7${middle.length} more lines of the form "${rangeTemplate(middle)}" \u2026`;
}

/** One same-shape line with every varying number shown as `{min..max}`. */
export function rangeTemplate(middle: readonly string[]): string {
  const slots = lineNumbers(middle[0]!).map((n) => ({ min: n, max: n }));
  for (const line of middle) {
    lineNumbers(line).forEach((n, k) => {
      const slot = slots[k];
      if (slot === undefined) return;
      if (compareDigits(n, slot.min) < 0) slot.min = n;
      if (compareDigits(n, slot.max) > 0) slot.max = n;
    });
  }
  let k = 0;
  return middle[0]!.replace(/\d+/g, () => {
    const slot = slots[k++]!;
    return slot.min === slot.max ? slot.min : `{${slot.min}..${slot.max}}`;
  });
}

/** Numeric comparison of digit strings of any length (leading zeros ignored). */
function compareDigits(a: string, b: string): number {
  const x = a.replace(/^0+(?=\d)/, '');
  const y = b.replace(/^0+(?=\d)/, '');
  if (x.length !== y.length) return x.length - y.length;
  return x < y ? -1 : x > y ? 1 : 0;
}
