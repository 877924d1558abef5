/**
 * Full-text search over artifact content and tool names.
 *
 * Semantics: the trimmed query is plain text, matched as a case-insensitive (Unicode-folded)
 * SUBSTRING of the content or of any tool name the artifact was observed under. It is never
 * interpreted as FTS5 or SQL syntax: it is bound as a parameter and wrapped as one quoted FTS5
 * phrase with embedded quotes doubled. Queries of three or more code points use the trigram index
 * (a trigram phrase match is exactly a substring match); shorter ones, and any the FTS parser
 * cannot take, scan the content with the same folding (slower, still exact).
 */
import type Database from 'better-sqlite3';
import { codePointLength, foldCase } from './identity.js';
import type { ArtifactSummary } from './types.js';

const COLUMNS = `a.artifact_id AS artifactId, a.sha256 AS sha256, a.char_count AS chars, a.byte_count AS bytes,
  a.tool_name AS toolName, a.created_at AS createdAt,
  (SELECT COUNT(*) FROM artifact_observations o WHERE o.artifact_id = a.artifact_id) AS observationCount`;
const BY_TOOL = 'a.artifact_id IN (SELECT t.artifact_id FROM artifact_tools t WHERE instr(t.tool_fold, @needle) > 0)';
const ORDER = 'ORDER BY a.created_at DESC, a.seq DESC LIMIT @limit';

/** Quote text as one FTS5 phrase: inside double quotes only `"` is special, and doubling escapes it. */
export function ftsPhrase(text: string): string {
  return `"${text.replace(/"/g, '""')}"`;
}

export type SearchFn = (query: string, limit: number) => readonly ArtifactSummary[];

/** Prepare the search statements on one connection (needs the `tt_fold` SQL function). */
export function createSearch(raw: Database.Database): SearchFn {
  const indexed = raw.prepare(
    `SELECT ${COLUMNS} FROM artifacts a
     WHERE a.seq IN (SELECT rowid FROM artifact_fts WHERE artifact_fts MATCH @phrase) OR ${BY_TOOL} ${ORDER}`,
  );
  const scan = raw.prepare(
    `SELECT ${COLUMNS} FROM artifacts a WHERE instr(tt_fold(a.content), @needle) > 0 OR ${BY_TOOL} ${ORDER}`,
  );
  return (query, limit) => {
    const needle = foldCase(query.trim());
    if (needle === '') return Object.freeze([]);
    let rows: unknown[] | undefined;
    if (codePointLength(needle) >= 3 && !needle.includes('\u0000')) {
      try {
        rows = indexed.all({ phrase: ftsPhrase(needle), needle, limit });
      } catch {
        rows = undefined; // the FTS parser refused the phrase: fall back to the exact scan below
      }
    }
    rows ??= scan.all({ needle, limit });
    return Object.freeze(
      (rows as ArtifactSummary[]).map((r) => Object.freeze({ ...r, observationCount: Number(r.observationCount) })),
    );
  };
}
