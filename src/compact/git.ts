/**
 * git status, git diff and git log renderings. Each returns undefined when the text is not in the
 * shape it expects, so the caller falls back to the generic compactor.
 */
import { factorRuns } from './factor.js';
import { clipLine, splitLines, stripAnsi } from './lines.js';
import { directoryGroups, renderGroups } from './paths.js';

const FILE_HEADER =
  /^(?:diff --git |index |--- |\+\+\+ |new file mode|deleted file mode|old mode|new mode|similarity index|dissimilarity index|rename from|rename to|copy from|copy to|Binary files )/;

/** Longest run of same-prefix hunk lines kept whole after factoring. */
const MAX_RUN = 16;

/**
 * Unified diff: every file header and hunk header kept verbatim (the patch shape stays), runs of
 * changed lines factored (numbers-only-differ runs → template with count), long runs cut to their
 * first and last lines with a count, long context runs shortened.
 */
export function compactGitDiff(text: string): string | undefined {
  const lines = splitLines(stripAnsi(text));
  if (!lines.some((l) => l.startsWith('diff --git ') || l.startsWith('@@ '))) return undefined;
  const out: string[] = [];
  let files = 0;
  let added = 0;
  let removed = 0;
  let run: string[] = [];
  const flush = (): void => {
    if (run.length > 0) out.push(...compactRun(run));
    run = [];
  };
  let inHunk = false;
  for (const line of lines) {
    if (line.startsWith('diff --git ')) files += 1;
    const hunk = line.startsWith('@@ ');
    const header: boolean = line.startsWith('diff --git ') || (!inHunk && FILE_HEADER.test(line));
    if (hunk || header || !inHunk) {
      // Headers stay verbatim; a hunk header opens a hunk, a file header closes it.
      flush();
      out.push(hunk || header ? line : clipLine(line, 400));
      inHunk = hunk || (inHunk && !header);
      continue;
    }
    if (line.startsWith('+')) added += 1;
    else if (line.startsWith('-')) removed += 1;
    if (run.length > 0 && run[0]![0] !== line[0]) flush();
    run.push(clipLine(line, 400));
  }
  flush();
  return [`[diff: ${files || 1} file${files === 1 ? '' : 's'}, +${added} -${removed}]`, ...out].join('\n');
}

function compactRun(run: readonly string[]): string[] {
  const prefix = run[0]![0] ?? ' ';
  if (prefix === ' ' && run.length > 7) {
    return [...run.slice(0, 3), `\u2026 ${run.length - 6} unchanged lines \u2026`, ...run.slice(-3)];
  }
  const factored = factorRuns(run);
  if (factored.length <= MAX_RUN) return factored;
  const label = prefix === '+' ? 'added' : prefix === '-' ? 'removed' : 'more';
  return [...factored.slice(0, 10), `\u2026 ${factored.length - 14} more ${label} lines \u2026`, ...factored.slice(-4)];
}

const STATUS_SECTION =
  /^(Changes to be committed|Changes not staged for commit|Untracked files|Unmerged paths|Ignored files):$/;
const STATUS_ENTRY =
  /^\t(?:(new file|modified|deleted|renamed|copied|typechange|both modified|both added|both deleted|added by us|added by them|deleted by us|deleted by them):\s+)?(.+)$/;
const PORCELAIN = /^([ MTADRCU?!]{2}) (.+)$/;

/** git status (long or short/porcelain format): hints dropped, paths grouped by section, kind and directory. */
export function compactGitStatus(text: string): string | undefined {
  const lines = splitLines(stripAnsi(text));
  const long = lines.some((l) => STATUS_SECTION.test(l));
  const short = !long && lines.length > 0 && lines.every((l) => l === '' || PORCELAIN.test(l) || l.startsWith('## '));
  if (!long && !short) return undefined;
  const groups = new Map<string, string[]>();
  const out: string[] = [];
  let section = '';
  const add = (key: string, path: string): void => {
    if (!groups.has(key)) {
      groups.set(key, []);
      out.push(`\u0000${key}`);
    }
    groups.get(key)!.push(path);
  };
  for (const line of lines) {
    const header = STATUS_SECTION.exec(line);
    if (header !== null) {
      section = header[1]!;
      continue;
    }
    if (/^\s+\(use "git /.test(line) || line.trim() === '') continue;
    const entry = long ? STATUS_ENTRY.exec(line) : null;
    const porcelain = short ? PORCELAIN.exec(line) : null;
    if (entry !== null) add(`${section}: ${entry[1] ?? 'untracked'}`, entry[2]!);
    else if (porcelain !== null) add(porcelain[1]!.replace(/ /g, '.'), porcelain[2]!);
    else out.push(line);
  }
  return out
    .flatMap((l) => {
      if (!l.startsWith('\u0000')) return [l];
      const paths = groups.get(l.slice(1))!;
      return [`${l.slice(1)} (${paths.length}):`, ...renderGroups(directoryGroups(paths), 60).map((p) => `  ${p}`)];
    })
    .join('\n');
}

const COMMIT = /^commit ([0-9a-f]{7,64})(.*)$/;

/** git log (medium format): one line per commit — short hash, refs, date, author, subject. */
export function compactGitLog(text: string): string | undefined {
  const lines = splitLines(stripAnsi(text));
  if (!COMMIT.test(lines[0] ?? '') || lines.some((l) => l.startsWith('diff --git '))) return undefined;
  const out: string[] = [];
  let current: { head: string; author: string; date: string; subject: string; body: number } | undefined;
  const flush = (): void => {
    if (current === undefined) return;
    const more = current.body > 0 ? ` (+${current.body} body lines)` : '';
    out.push(`${current.head} ${current.date} ${current.author}: ${clipLine(current.subject, 160)}${more}`);
  };
  for (const line of lines) {
    const commit = COMMIT.exec(line);
    if (commit !== null) {
      flush();
      current = {
        head: `${commit[1]!.slice(0, 9)}${commit[2]!.trimEnd()}`,
        author: '',
        date: '',
        subject: '',
        body: 0,
      };
    } else if (current === undefined) {
      out.push(line);
    } else if (line.startsWith('Author: ')) {
      current.author = line
        .slice(8)
        .replace(/\s*<[^>]*>\s*$/, '')
        .trim();
    } else if (line.startsWith('Date: ')) {
      current.date = shortDate(line.slice(6).trim());
    } else if (line.startsWith('Merge: ')) {
      current.head += ` merge(${line.slice(7).trim()})`;
    } else if (line.startsWith('    ')) {
      if (current.subject === '') current.subject = line.trim();
      else if (line.trim() !== '') current.body += 1;
    }
  }
  flush();
  return out.join('\n');
}

function shortDate(raw: string): string {
  const ms = Date.parse(raw);
  return Number.isNaN(ms) ? raw : new Date(ms).toISOString().slice(0, 16).replace('T', ' ');
}
