/**
 * ls / ls -R / ls -l / find / tree output: entries grouped by directory with exact counts. Every
 * directory keeps its line; the names listed per directory are capped so the view fits
 * LISTING_MAX_CHARS (the largest cap that fits, at least 3), and a directory over the cap says how
 * many more it has. The names the conversation is about survive as focus lines (src/compact/focus.ts).
 */
import { splitLines, stripAnsi } from './lines.js';
import { commonRoot, directoryGroups, renderGroups, rootLine, underRoot, type DirectoryGroups } from './paths.js';

/** Per-directory names listed when the whole listing fits anyway. */
const PER_DIR = 40;
/** Size the view of a large listing is fitted to. */
export const LISTING_MAX_CHARS = 12_000;

/** The rendering with the largest per-directory cap (≤ PER_DIR, ≥ 3) that fits LISTING_MAX_CHARS. */
function fitted(render: (cap: number) => string): string {
  let lo = 3;
  let hi = PER_DIR;
  let best = render(hi);
  if (best.length <= LISTING_MAX_CHARS) return best;
  best = render(lo);
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    const text = render(mid);
    if (text.length <= LISTING_MAX_CHARS) {
      best = text;
      lo = mid;
    } else hi = mid - 1;
  }
  return best;
}
const LONG_ENTRY =
  /^([dlcbps-])[rwxsStT-]{9}[.+@]?\s+\d+\s+\S+\s+\S+\s+([\d.,]+[KMGT]?)\s+(\w{3}\s+\d+\s+[\d:]+|\d{4}-\d\d-\d\d(?: [\d:.]+)?(?: [+-]\d{4})?)\s+(.+)$/;
const TREE_ENTRY = /^((?:[│|`]\s{3}|\s{4})*)(?:[├└|`][─-]{2}\s)(.+)$/u;

/** Pick the listing shape and render it; undefined when the text is not a listing. */
export function compactListing(text: string): string | undefined {
  const lines = splitLines(stripAnsi(text)).filter((l) => l.trim() !== '');
  if (lines.length === 0) return undefined;
  if (lines.some((l) => /^\S.*:$/.test(l)) && !lines.some((l) => LONG_ENTRY.test(l))) {
    const listed = recursiveBlocks(lines);
    return fitted((cap) => renderRecursive(listed, cap));
  }
  if (lines.filter((l) => LONG_ENTRY.test(l)).length >= lines.length * 0.6) return compactLong(lines);
  if (lines.filter((l) => TREE_ENTRY.test(l)).length >= lines.length * 0.6) {
    const tree = treePaths(lines);
    return fitted((cap) => renderTree(tree, cap));
  }
  if (lines.every((l) => !/\s{2,}|\t/.test(l))) {
    const groups = directoryGroups(lines);
    const root = commonRoot([...groups.names.keys()]);
    const head = root === '' ? [] : [rootLine(root)];
    return fitted((cap) => [...head, ...renderGroups(groups, cap, root)].join('\n'));
  }
  return undefined;
}

/** One `ls -R` block: its directory, the names listed under it, and how many of them are listed directories. */
interface RecursiveBlock {
  readonly dir: string;
  readonly files: readonly string[];
  readonly subdirs: number;
  readonly empty: boolean;
}

/**
 * `ls -R`: `dir:` headers followed by entries (one per line, or several per line on a tty). An
 * entry that is itself a listed directory is left out of its parent's line (its own line follows).
 * Parsed once; {@link renderRecursive} renders it for each cap `fitted` tries.
 */
function recursiveBlocks(lines: readonly string[]): RecursiveBlock[] {
  let current = { dir: '.', entries: [] as string[] };
  const blocks = [current];
  for (const line of lines) {
    if (/^\S.*:$/.test(line)) blocks.push((current = { dir: line.slice(0, -1), entries: [] }));
    else current.entries.push(...line.trim().split(/\s{2,}|\t/));
  }
  const headers = new Set(blocks.map((b) => b.dir.replace(/\/+$/, '')));
  return blocks.map(({ dir, entries }) => {
    const base = dir.replace(/\/+$/, '');
    const files = entries.filter((e) => !headers.has(base === '.' ? e : `${base}/${e}`) && !headers.has(`./${e}`));
    return { dir, files, subdirs: entries.length - files.length, empty: entries.length === 0 };
  });
}

function renderRecursive(blocks: readonly RecursiveBlock[], cap: number): string {
  const shownDirs = blocks.filter((b) => b.files.length > 0 || (b.empty && b.dir !== '.'));
  const root = commonRoot(shownDirs.map((b) => `${b.dir.replace(/\/+$/, '')}/`));
  const out: string[] = root === '' ? [] : [rootLine(root)];
  const named = (dir: string): string => underRoot(`${dir.replace(/\/+$/, '')}/`, root);
  for (const { dir, files, subdirs, empty } of blocks) {
    if (files.length === 0) {
      if (empty && dir !== '.') out.push(`${named(dir)} (empty)`);
      continue;
    }
    const shown = files.slice(0, cap).join(' ');
    const more = files.length > cap ? ` \u2026(+${files.length - cap} more)` : '';
    out.push(
      `${named(dir)} (${files.length}${subdirs > 0 ? ` + ${subdirs} dir${subdirs === 1 ? '' : 's'}` : ''}): ${shown}${more}`,
    );
  }
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

/** `tree`: the paths rebuilt from the indentation (parsed once), then grouped by directory. */
function treePaths(lines: readonly string[]): { groups: DirectoryGroups; other: string[] } {
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
  return { groups: directoryGroups(paths.filter((p) => !isDir.has(p))), other };
}

function renderTree({ groups, other }: { groups: DirectoryGroups; other: string[] }, cap: number): string {
  return [...other.slice(0, 1), ...renderGroups(groups, cap), ...other.slice(1)].join('\n');
}
