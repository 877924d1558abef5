/**
 * grep / rg / git grep output (`path:line:text`, `path-line-text` context, or `path:text`):
 * matches grouped by file with exact counts, the first few per file shown trimmed.
 */
import { clipLine, splitLines, stripAnsi } from './lines.js';

const WITH_LINE = /^([^\s:][^:]*?):(\d+)[:-](.*)$/;
const WITHOUT_LINE = /^([^\s:][^:]*?\.[\w]+|[^\s:]*\/[^\s:]*):(.*)$/;

export interface GrepOptions {
  /** Matches shown per file. Default 5. */
  readonly perFile?: number;
  /** Files listed with their matches; the rest are listed by name and count only. Default 60. */
  readonly maxFiles?: number;
  /** Size target: fewer matches per file are shown (down to none) until the rendering fits. Default 8000. */
  readonly maxChars?: number;
}

/** Group matches per file, showing fewer per file until the rendering fits `maxChars`. */
export function compactGrep(text: string, options: GrepOptions = {}): string | undefined {
  const maxChars = options.maxChars ?? 8000;
  let best: string | undefined;
  for (const perFile of [options.perFile ?? 5, 3, 1, 0]) {
    best = renderGrep(text, { ...options, perFile });
    if (best === undefined || best.length <= maxChars) return best;
  }
  return best;
}

/** Group matches per file; undefined when fewer than 60% of the lines parse as matches. */
function renderGrep(text: string, options: GrepOptions = {}): string | undefined {
  const perFile = options.perFile ?? 5;
  const maxFiles = options.maxFiles ?? 60;
  const lines = splitLines(stripAnsi(text));
  const files = new Map<string, string[]>();
  const other: string[] = [];
  let parsed = 0;
  for (const line of lines) {
    if (line === '--') continue;
    const m = WITH_LINE.exec(line) ?? WITHOUT_LINE.exec(line);
    if (m === null) {
      other.push(line);
      continue;
    }
    parsed += 1;
    const entry = m.length === 4 ? `${m[2]}: ${m[3]!.trim()}` : m[2]!.trim();
    const list = files.get(m[1]!);
    if (list === undefined) files.set(m[1]!, [entry]);
    else list.push(entry);
  }
  if (lines.length === 0 || parsed < lines.length * 0.6) return undefined;
  const out = [`[matches: ${parsed} in ${files.size} files]`];
  let listed = 0;
  const rest: string[] = [];
  for (const [file, entries] of files) {
    if (listed >= maxFiles) {
      rest.push(`${file} (${entries.length})`);
      continue;
    }
    listed += 1;
    out.push(`${file} (${entries.length}):`);
    for (const entry of entries.slice(0, perFile)) out.push(`  ${clipLine(entry, 160)}`);
    if (entries.length > perFile && perFile > 0) out.push(`  \u2026 +${entries.length - perFile} more`);
  }
  if (rest.length > 0) out.push(`\u2026 ${rest.length} more files: ${rest.join(', ')}`);
  for (const line of other.slice(0, 40)) out.push(clipLine(line, 300));
  if (other.length > 40) out.push(`\u2026 ${other.length - 40} other lines \u2026`);
  return out.join('\n');
}
