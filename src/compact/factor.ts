/**
 * Run factoring: consecutive identical lines become one line with a count (reference format
 * `line  [repeated ×n]`), and long runs of lines that differ only in their numbers become the
 * first line, one template line naming the count and the range of every varying number, and the
 * last line. Nothing is lost for good: the exact text is always in the vault.
 */
import { lineNumbers, lineShape } from './lines.js';

/** Shortest run of same-shape (numbers-only-differ) lines that is factored. */
const MIN_RUN = 5;

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
    if (run.length >= MIN_RUN && shape !== first && run.some((line) => line !== first)) {
      const middle = run.slice(1, -1);
      const template = `\u2026 \u00d7${middle.length} more lines of the form "${rangeTemplate(middle)}" \u2026`;
      out.push(first, template, run.at(-1)!);
    } else {
      out.push(...collapseIdenticalRuns(run));
    }
    i = j;
  }
  return out;
}

/** Collapse only consecutive identical lines (the reference behaviour: a pair stays, a longer run is one line with its count). */
export function collapseIdenticalRuns(lines: readonly string[]): string[] {
  const out: string[] = [];
  let i = 0;
  while (i < lines.length) {
    let j = i + 1;
    while (j < lines.length && lines[j] === lines[i]) j += 1;
    out.push(...(j - i <= 2 ? lines.slice(i, j) : [`${lines[i]}  [repeated \u00d7${j - i}]`]));
    i = j;
  }
  return out;
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
