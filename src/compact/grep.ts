/**
 * grep / rg / git grep output (`path:line:text`, `path-line-text` context, or `path:text`): the
 * first matches of every file stay verbatim, line numbers included, and every file keeps its
 * exact match count. Fewer matches per file are shown (down to one) until the view fits; when
 * even one per file does not fit, the first files keep theirs and the rest are listed by name and
 * count. Context lines and `--` separators are dropped (the exact output is in the vault).
 */
import { clipLine, splitLines, stripAnsi } from './lines.js';

const WITH_LINE = /^([^\s:][^:]*?):(\d+):(.*)$/;
const CONTEXT_LINE = /^([^\s:][^:]*?)-(\d+)-(.*)$/;
const WITHOUT_LINE = /^([^\s:][^:]*?\.[\w]+|[^\s:]*\/[^\s:]*):(.*)$/;

export interface GrepOptions {
  /** Size target in code points. Default 8000. */
  readonly maxChars?: number;
  /** The searched text when known: a long match line is clipped around it, not in its middle. */
  readonly term?: string;
}

interface FileMatches {
  readonly file: string;
  readonly lines: string[];
}

const MAX_MATCH_LINE = 300;

/** Group matches per file; undefined when fewer than 60% of the lines parse as matches. */
export function compactGrep(text: string, options: GrepOptions = {}): string | undefined {
  const maxChars = options.maxChars ?? 8000;
  const lines = splitLines(stripAnsi(text));
  const byFile = new Map<string, FileMatches>();
  const other: string[] = [];
  let parsed = 0;
  let matches = 0;
  let context = 0;
  for (const line of lines) {
    if (line === '--') {
      parsed += 1;
      continue;
    }
    const m = WITH_LINE.exec(line) ?? WITHOUT_LINE.exec(line);
    if (m === null) {
      if (CONTEXT_LINE.test(line)) {
        parsed += 1;
        context += 1;
      } else other.push(line);
      continue;
    }
    parsed += 1;
    matches += 1;
    const entry = byFile.get(m[1]!) ?? { file: m[1]!, lines: [] };
    byFile.set(m[1]!, entry);
    entry.lines.push(clipMatch(line, m[1]!.length, options.term));
  }
  if (lines.length === 0 || matches === 0 || parsed < lines.length * 0.6) return undefined;
  const files = [...byFile.values()];
  const head = `[matches: ${matches} in ${files.length} files${context > 0 ? `; ${context} context lines dropped` : ''}]`;
  const tail = other.slice(0, 40).map((l) => clipLine(l, 300));
  if (other.length > 40) tail.push(`\u2026 ${other.length - 40} other lines \u2026`);
  const fixed = head.length + tail.reduce((n, l) => n + l.length + 1, 1);
  for (const perFile of [5, 3, 2, 1]) {
    const body = renderFiles(files, perFile, files.length, Infinity);
    if (fixed + size(body) <= maxChars) return [head, ...body, ...tail].join('\n');
  }
  // One match per file does not fit: the first files keep theirs, the rest are named with counts
  // (as many names as the budget allows; the exact output has the others).
  const shownCost = files.map((f) => f.lines[0]!.length + 1 + (f.lines.length > 1 ? moreLine(f, 1).length + 1 : 0));
  const nameCost = files.map((f) => f.file.length + String(f.lines.length).length + 5);
  const reserve = Math.min(
    nameCost.reduce((n, c) => n + c, 0),
    Math.floor(maxChars / 4),
  );
  let used = fixed + 80;
  let shown = 0;
  while (shown < files.length && used + shownCost[shown]! <= maxChars - reserve) used += shownCost[shown++]!;
  return [head, ...renderFiles(files, 1, shown, maxChars - used), ...tail].join('\n');
}

function moreLine(f: FileMatches, perFile: number): string {
  return `  \u2026 +${f.lines.length - perFile} more in this file`;
}

function renderFiles(files: readonly FileMatches[], perFile: number, shown: number, namesBudget: number): string[] {
  const out: string[] = [];
  for (const f of files.slice(0, shown)) {
    out.push(...f.lines.slice(0, perFile));
    if (f.lines.length > perFile) out.push(moreLine(f, perFile));
  }
  const rest = files.slice(shown);
  if (rest.length === 0) return out;
  const names: string[] = [];
  let chars = 0;
  for (const f of rest) {
    const name = `${f.file} (${f.lines.length})`;
    if (chars + name.length + 2 > namesBudget) break;
    names.push(name);
    chars += name.length + 2;
  }
  const unnamed = rest.length - names.length;
  out.push(
    `\u2026 ${rest.length} more files, match counts only: ${names.join(', ')}${unnamed > 0 ? `${names.length > 0 ? ', ' : ''}\u2026 (+${unnamed} files)` : ''}`,
  );
  return out;
}

function size(lines: readonly string[]): number {
  return lines.reduce((n, l) => n + l.length + 1, 0);
}

/** A match line is kept verbatim unless very long; then its text is cut around the searched term. */
function clipMatch(line: string, pathLength: number, term?: string): string {
  if (line.length <= MAX_MATCH_LINE) return line;
  const at = term === undefined || term === '' ? -1 : line.indexOf(term, pathLength);
  if (at < 0) return clipLine(line, MAX_MATCH_LINE);
  const prefix = line.slice(0, line.indexOf(':', pathLength + 1) + 1);
  const half = Math.floor((MAX_MATCH_LINE - prefix.length - term!.length) / 2);
  const start = Math.max(prefix.length, at - half);
  const end = Math.min(line.length, at + term!.length + half);
  return `${prefix}${start > prefix.length ? '\u2026' : ''}${line.slice(start, end)}${end < line.length ? '\u2026' : ''}`;
}

/** The literal searched for by a grep/rg command line, when it has a plain one. */
export function grepTerm(command: string): string | undefined {
  const words = command.match(/"[^"]*"|'[^']*'|\S+/g) ?? [];
  const tool = words.findIndex((w) => /(?:^|\/)(?:grep|egrep|fgrep|rg|ag|ack)$/.test(w) || w === 'grep');
  if (tool < 0) return undefined;
  for (let i = tool + 1; i < words.length; i += 1) {
    const w = words[i]!;
    if (w === '-e' || w === '--regexp') return unquote(words[i + 1]);
    if (w.startsWith('-')) continue;
    return unquote(w);
  }
  return undefined;
}

function unquote(word: string | undefined): string | undefined {
  if (word === undefined) return undefined;
  const bare = /^(["']).*\1$/.test(word) ? word.slice(1, -1) : word;
  return /^[\w .<>:@#$/-]+$/.test(bare) && bare.trim() !== '' ? bare : undefined;
}
