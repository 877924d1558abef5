/**
 * ls / ls -R / ls -l / find / tree output: entries grouped by directory with exact counts.
 */
import { splitLines, stripAnsi } from './lines.js';
import { groupByDirectory } from './paths.js';

const PER_DIR = 40;
const LONG_ENTRY = /^([dlcbps-])[rwxsStT-]{9}[.+@]?\s+\d+\s+\S+\s+\S+\s+([\d.,]+[KMGT]?)\s+(\w{3}\s+\d+\s+[\d:]+|\d{4}-\d\d-\d\d(?: [\d:.]+)?(?: [+-]\d{4})?)\s+(.+)$/;
const TREE_ENTRY = /^((?:[│|`]\s{3}|\s{4})*)(?:[├└|`][─-]{2}\s)(.+)$/u;

/** Pick the listing shape and render it; undefined when the text is not a listing. */
export function compactListing(text: string): string | undefined {
  const lines = splitLines(stripAnsi(text)).filter((l) => l.trim() !== '');
  if (lines.length === 0) return undefined;
  if (lines.some((l) => /^\S.*:$/.test(l)) && !lines.some((l) => LONG_ENTRY.test(l))) return compactRecursive(lines);
  if (lines.filter((l) => LONG_ENTRY.test(l)).length >= lines.length * 0.6) return compactLong(lines);
  if (lines.filter((l) => TREE_ENTRY.test(l)).length >= lines.length * 0.6) return compactTree(lines);
  if (lines.every((l) => !/\s{2,}|\t/.test(l))) return groupByDirectory(lines, PER_DIR).join('\n');
  return undefined;
}

/** `ls -R`: `dir:` headers followed by entries (one per line, or several per line on a tty). */
function compactRecursive(lines: readonly string[]): string {
  const out: string[] = [];
  let dir = '.';
  let entries: string[] = [];
  const flush = (): void => {
    if (entries.length === 0) return;
    const shown = entries.slice(0, PER_DIR).join(' ');
    const more = entries.length > PER_DIR ? ` \u2026(+${entries.length - PER_DIR} more)` : '';
    out.push(`${dir}/ (${entries.length}): ${shown}${more}`);
    entries = [];
  };
  for (const line of lines) {
    if (/^\S.*:$/.test(line)) {
      flush();
      dir = line.slice(0, -1);
    } else {
      entries.push(...line.trim().split(/\s{2,}|\t/));
    }
  }
  flush();
  return out.join('\n');
}

/** `ls -l`: directories, links and files (with sizes) on one line each per kind. */
function compactLong(lines: readonly string[]): string {
  const dirs: string[] = [];
  const files: string[] = [];
  const other: string[] = [];
  for (const line of lines) {
    const m = LONG_ENTRY.exec(line);
    if (m === null) {
      other.push(line);
      continue;
    }
    const [, kind, size, , name] = m;
    if (name === '.' || name === '..') continue;
    if (kind === 'd') dirs.push(`${name}/`);
    else if (kind === 'l') files.push(name!);
    else files.push(`${name} ${size}`);
  }
  const out = [...other];
  if (dirs.length > 0) out.push(`dirs (${dirs.length}): ${dirs.join(' ')}`);
  if (files.length > 0) out.push(`files (${files.length}): ${files.join(', ')}`);
  return out.join('\n');
}

/** `tree`: rebuild the paths from the indentation, then group by directory. */
function compactTree(lines: readonly string[]): string {
  const stack: string[] = [];
  const paths: string[] = [];
  const other: string[] = [];
  for (const line of lines) {
    const m = TREE_ENTRY.exec(line);
    if (m === null) {
      other.push(line);
      continue;
    }
    const depth = Array.from(m[1]!).length / 4;
    stack.length = depth;
    stack.push(m[2]!);
    paths.push(stack.join('/'));
  }
  const isDir = new Set(paths.map((p) => p.slice(0, p.lastIndexOf('/'))).filter((p) => p !== ''));
  const leaves = paths.filter((p) => !isDir.has(p));
  return [...other.slice(0, 1), ...groupByDirectory(leaves, PER_DIR), ...other.slice(1)].join('\n');
}
