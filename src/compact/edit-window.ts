/**
 * The first view of an editor's result that re-prints a numbered window of the file it edited
 * (SWE-agent's `[File: path (N lines total)]` + `NN:line`, OpenHands' and Claude Code's "result of
 * running `cat -n` on a snippet of path" + `NN\tline`), when an earlier output of the same file is
 * still shown in the conversation ({@link editWindowView}; every other row, the edited lines and
 * whatever moved, keeps two rows of context either side). The shape is recognised, never a tool
 * name. Pure: the caller knows which earlier output is still in view and what to call it, and
 * appends the receipt of the full result.
 */
import { codePoints } from '../measure/canonical-json.js';
import { splitLines } from './lines.js';

/** A numbered row: `NN:text` (SWE-agent) or `   NN\ttext` (cat -n). */
const ROW = /^(\s*)(\d+)(:|\t)(.*)$/;
const SWE_HEADER = /^\[File: (.+?) \(\d+ lines total\)\]$/;
const CAT_HEADER = /result of running `cat -n` on (?:a snippet of )?(\S+?):?$/;

/** Rows of context kept either side of a row the earlier output does not show. */
export const EDIT_CONTEXT_ROWS = 2;

export interface NumberedWindow {
  /** The file the window shows. */
  readonly path: string;
  /** Each line's row number, or undefined for a line that is not a numbered row. */
  readonly numbers: readonly (number | undefined)[];
  readonly lines: readonly string[];
}

/** The numbered window `text` prints, if it is one (a header naming the file, then numbered rows). */
export function readNumberedWindow(text: string): NumberedWindow | undefined {
  const lines = splitLines(text);
  const path = lines
    .slice(0, 3)
    .map((l) => (SWE_HEADER.exec(l.trim()) ?? CAT_HEADER.exec(l.trim()))?.[1])
    .find((p) => p !== undefined);
  if (path === undefined) return undefined;
  const numbers = lines.map((l) => ROW.exec(l)?.[2]).map((n) => (n === undefined ? undefined : Number(n)));
  return numbers.filter((n) => n !== undefined).length >= 3 ? { path, numbers, lines } : undefined;
}

/**
 * The edit result `result` with the rows `earlier` already shows (same file, same number, same
 * text) replaced by one line per run naming `earlierName`; undefined when either is not a numbered
 * window, they show different files, or the view would not be smaller.
 */
export function editWindowView(result: string, earlier: string, earlierName: string): string | undefined {
  const now = readNumberedWindow(result);
  const before = readNumberedWindow(earlier);
  if (now === undefined || before === undefined || now.path !== before.path) return undefined;
  const rows = new Map<number, string>();
  before.lines.forEach((l, i) => {
    if (before.numbers[i] !== undefined) rows.set(before.numbers[i]!, l);
  });
  const shift = dominantShift(now, before);
  // Per line: 0 = the earlier view shows it as it is, `shift` = it shows it `shift` rows higher, null = keep.
  const from = now.lines.map((l, i): number | null => {
    const n = now.numbers[i];
    if (n === undefined) return null;
    if (rows.get(n) === l) return 0;
    const moved = shift === 0 ? undefined : rows.get(n - shift);
    return moved !== undefined && renumber(moved, n) === l ? shift : null;
  });
  const keep = from.map((f) => f === null);
  const rowIndexes = now.numbers.flatMap((n, i) => (n === undefined ? [] : [i]));
  if (rowIndexes.every((i) => from[i] !== null)) {
    // Nothing new in the window: its first and last rows still anchor the numbers.
    keep[rowIndexes[0]!] = true;
    keep[rowIndexes.at(-1)!] = true;
  }
  from.forEach((f, i) => {
    if (f !== null || now.numbers[i] === undefined) return;
    for (let j = Math.max(0, i - EDIT_CONTEXT_ROWS); j <= Math.min(now.lines.length - 1, i + EDIT_CONTEXT_ROWS); j++)
      keep[j] = true;
  });
  const out: string[] = [];
  for (let i = 0; i < now.lines.length;) {
    if (keep[i]) {
      out.push(now.lines[i]!);
      i++;
      continue;
    }
    let j = i + 1;
    while (j < now.lines.length && !keep[j] && from[j] === from[i] && now.numbers[j] === now.numbers[j - 1]! + 1) j++;
    const first = now.numbers[i]!;
    const last = now.numbers[j - 1]!;
    const span = first === last ? `line ${first}` : `lines ${first}-${last}`;
    const d = from[i]!;
    out.push(
      d === 0
        ? `[${span} unchanged: as shown in ${earlierName}]`
        : `[${span}: ${first === last ? 'line' : 'lines'} ${first - d}${first === last ? '' : `-${last - d}`} as shown in ${earlierName}, now ${Math.abs(d)} ${d > 0 ? 'lower' : 'higher'}]`,
    );
    i = j;
  }
  const view = out.join('\n');
  return codePoints(view) < codePoints(result) ? view : undefined;
}

/** The row offset most rows of `now` have against the same text in `before` (0 when none). */
function dominantShift(now: NumberedWindow, before: NumberedWindow): number {
  const at = new Map<string, number[]>();
  before.lines.forEach((l, i) => {
    const n = before.numbers[i];
    if (n === undefined) return;
    const t = ROW.exec(l)![4]!;
    if (t.trim().length < 4) return; // braces and blank rows match anywhere
    at.set(t, [...(at.get(t) ?? []), n]);
  });
  const votes = new Map<number, number>();
  now.lines.forEach((l, i) => {
    const n = now.numbers[i];
    if (n === undefined) return;
    const seen = at.get(ROW.exec(l)![4]!);
    if (seen?.length !== 1) return;
    const d = n - seen[0]!;
    if (d !== 0) votes.set(d, (votes.get(d) ?? 0) + 1);
  });
  let best = 0;
  let count = 0;
  for (const [d, c] of votes) if (c > count) [best, count] = [d, c];
  return best;
}

/** An earlier row's line as it reads at row `n` (same padding width and separator). */
export function renumber(line: string, n: number): string {
  const m = ROW.exec(line)!;
  const width = m[1]!.length + m[2]!.length;
  return `${m[1] === '' ? String(n) : String(n).padStart(width)}${m[3]}${m[4]}`;
}
