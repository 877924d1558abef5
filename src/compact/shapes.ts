/**
 * Tool outputs recognised by their shape, not by the tool's name: agents name their tools
 * differently (`keyword_search`, `nls_search`, `mcp__sourcegraph__search`, `Read`, `view`), and an
 * MCP server wraps its text in JSON. Four shapes get a first view of their own: a JSON/MCP text
 * wrapper ({@link unwrapText}: the view is made of the text inside), search hits with context
 * ({@link compactSearchHits}), a line-numbered read (`  12\t…`, `12: …`, `12→…`: head, tail,
 * failure lines and focus lines) and a listing of paths (src/compact/listing.ts).
 */
import { parseArgs } from '../model/read.js';
import { NUMBERED_LINE } from './diagnostic-lines.js';
import { compactListing } from './listing.js';
import { clipLine, splitLines, stripAnsi } from './lines.js';

/** The shape a view is made for. */
export type OutputShape = 'search_hits' | 'numbered_read' | 'listing';

/** A text shorter than this is never read as a JSON wrapper (nothing to gain). */
const MIN_WRAPPED_CHARS = 200;

/** The text parts of an MCP/JSON content value, joined; undefined when it holds anything else. */
function textParts(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (!Array.isArray(value) || value.length === 0) return undefined;
  const parts = value.map((p: unknown) =>
    typeof p === 'string' ? p : typeof p === 'object' && p !== null ? (p as { text?: unknown }).text : undefined,
  );
  return parts.every((t) => typeof t === 'string') ? parts.join('\n') : undefined;
}

/**
 * The text inside a JSON/MCP text wrapper: `{"text": …}`, `{"content": [{"type": "text", "text": …}]}`,
 * `[{"type": "text", "text": …}]`, or `{"result": …}` of one of those. Undefined when `content` is
 * not such a wrapper (plain text, or JSON with other data a view would have to drop).
 */
export function unwrapText(content: string): string | undefined {
  const t = content.trim();
  if (t.length < MIN_WRAPPED_CHARS || !/^[[{]/.test(t)) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(t);
  } catch {
    return undefined;
  }
  for (let depth = 0; depth < 3; depth++) {
    if (Array.isArray(parsed)) return textParts(parsed);
    if (typeof parsed !== 'object' || parsed === null) return undefined;
    const o = parsed as Record<string, unknown>;
    const keys = Object.keys(o).filter((k) => k !== 'type' && k !== 'isError' && k !== 'is_error');
    if (keys.length !== 1) return undefined;
    const inner = o[keys[0]!];
    if (keys[0] === 'text' && typeof inner === 'string') return inner;
    if (keys[0] !== 'content' && keys[0] !== 'result' && keys[0] !== 'output') return undefined;
    if (typeof inner === 'string') return inner;
    parsed = inner;
  }
  return undefined;
}

/** `# repo – path`, `## path`, `# path:` (a search hit's header). */
const HIT_HEADER = /^#{1,3} +(\S.*?)\s*:?$/;
/** `NN: text`, `NN- text`, `NN| text` (a hit's numbered row; `:` marks a match in grep's style). */
const HIT_ROW = /^\s*(\d+)([:|-])\s?(.*)$/;
const REPO_PATH = / [–—] | - | › /;

/** The shape of `text`, if it is one a view is made for. */
export function outputShape(text: string): OutputShape | undefined {
  const lines = splitLines(stripAnsi(text)).filter((l) => l.trim() !== '');
  if (lines.length < 3) return undefined;
  let headers = 0;
  let rows = 0;
  let numbered = 0;
  for (const line of lines) {
    if (HIT_HEADER.test(line)) headers++;
    else if (HIT_ROW.test(line)) rows++;
    if (NUMBERED_LINE.test(line)) numbered++;
  }
  if (headers >= 1 && rows >= 2 && headers + rows >= lines.length * 0.8) return 'search_hits';
  if (numbered >= 10 && numbered >= lines.length * 0.8) return 'numbered_read';
  if (lines.length >= 10 && compactListing(text) !== undefined && looksLikePaths(lines)) return 'listing';
  return undefined;
}

/** Most lines are paths or `dir:` headers with names (no prose). */
function looksLikePaths(lines: readonly string[]): boolean {
  let paths = 0;
  for (const l of lines) if (/^\S.*:$/.test(l) || /^[\w./@+~-]+(?:\/|\s{2,}[\w./@+~-]+)*\/?$/.test(l.trim())) paths++;
  return paths >= lines.length * 0.8;
}

/** Sourcegraph and grep query syntax that is not text to find. */
const QUERY_FILTER =
  /^-?(?:repo|file|lang|language|type|count|context|case|patterntype|rev|select|timeout|fork|archived|visibility|content|path|f|r|l):/i;

/**
 * The words a search asked for, from its call's arguments (`query`, `pattern`, `q`, `keyword`,
 * `search`, `regex`): filters (`repo:`, `lang:`, …) and boolean operators left out.
 */
export function searchTerms(args: unknown): string[] {
  const value = parseArgs(args);
  const out = new Set<string>();
  for (const key of ['query', 'pattern', 'q', 'keyword', 'keywords', 'search', 'regex', 'term', 'text']) {
    const v = value[key];
    if (typeof v !== 'string') continue;
    for (const raw of v.match(/"[^"]+"|'[^']+'|\S+/g) ?? []) {
      if (QUERY_FILTER.test(raw) || /^(?:AND|OR|NOT)$/.test(raw)) continue;
      const word = raw.replace(/^["']|["']$/g, '').replace(/\\(.)/g, '$1');
      // A regular expression's literal runs are what a match line holds.
      for (const part of word.split(/[.*+?^${}()|[\]]+/)) if (part.length >= 2) out.add(part.toLowerCase());
    }
  }
  return [...out];
}

interface Hit {
  readonly repo: string | undefined;
  readonly path: string;
  readonly rows: { readonly n: string; readonly sep: string; readonly text: string; readonly line: string }[];
}

/** Parse search hits; undefined when the text is not that shape. */
function parseHits(lines: readonly string[]): { hits: Hit[]; other: string[] } | undefined {
  const hits: Hit[] = [];
  const other: string[] = [];
  let current: Hit | undefined;
  for (const line of lines) {
    if (line.trim() === '') continue;
    const h = HIT_HEADER.exec(line);
    if (h !== null) {
      const title = h[1]!;
      const split = REPO_PATH.exec(title);
      current =
        split === null
          ? { repo: undefined, path: title, rows: [] }
          : { repo: title.slice(0, split.index), path: title.slice(split.index + split[0].length), rows: [] };
      hits.push(current);
      continue;
    }
    const r = HIT_ROW.exec(line);
    if (r !== null && current !== undefined) current.rows.push({ n: r[1]!, sep: r[2]!, text: r[3]!, line });
    else other.push(line);
  }
  return hits.length === 0 ? undefined : { hits, other };
}

/** Longest row kept whole in a search view. */
const MAX_ROW = 500;

/**
 * The view of search hits with context: every match line verbatim (`NN: text`, line number
 * included), under its path; a repository named by consecutive headers is said once, and so is a
 * path; context rows are left out and counted. Match lines are the rows that hold one of `terms`;
 * without terms (or when no row holds one) grep's `NN:` / `NN-` marks decide, else every row
 * stays. Undefined when the text is not search hits.
 */
export function compactSearchHits(text: string, terms: readonly string[] = []): string | undefined {
  const parsed = parseHits(splitLines(stripAnsi(text)));
  if (parsed === undefined) return undefined;
  const { hits, other } = parsed;
  const rows = hits.flatMap((h) => h.rows);
  const byTerm = (t: string): boolean => {
    const low = t.toLowerCase();
    return terms.some((w) => low.includes(w));
  };
  const anyTerm = terms.length > 0 && rows.some((r) => byTerm(r.text));
  const marked = rows.some((r) => r.sep === '-') && rows.some((r) => r.sep === ':');
  const isMatch = (r: Hit['rows'][number]): boolean => (anyTerm ? byTerm(r.text) : marked ? r.sep !== '-' : true);
  const out: string[] = [];
  let repo: string | undefined;
  let path: string | undefined;
  let kept = 0;
  const files = new Set<string>();
  const repos = new Set<string>();
  for (const h of hits) {
    files.add(`${h.repo ?? ''}\u0000${h.path}`);
    if (h.repo !== undefined) repos.add(h.repo);
    const matches = h.rows.filter(isMatch);
    if (h.repo !== repo) {
      if (h.repo !== undefined) out.push(`# ${h.repo}`);
      repo = h.repo;
      path = undefined;
    }
    if (h.path !== path || h.rows.length === 0) {
      out.push(`${h.repo === undefined ? '# ' : '## '}${h.path}`);
      path = h.path;
    }
    for (const r of matches) out.push(clipLine(r.line.trimEnd(), MAX_ROW));
    kept += matches.length;
  }
  const dropped = rows.length - kept;
  if (dropped === 0 && repos.size === 0) return undefined;
  const where = `${files.size} file${files.size === 1 ? '' : 's'}${repos.size > 0 ? ` of ${repos.size} repositor${repos.size === 1 ? 'y' : 'ies'}` : ''}`;
  const head = `[search results: ${kept} match line${kept === 1 ? '' : 's'} in ${where}${dropped > 0 ? `; ${dropped} context line${dropped === 1 ? '' : 's'} left out` : ''}]`;
  return [...other.slice(0, 5), head, ...out].join('\n');
}
