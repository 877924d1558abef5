/**
 * Full-text search over artifact content and tool names, and the deferred trigram index behind it.
 *
 * Semantics: the trimmed query is plain text, matched as a case-insensitive (Unicode-folded)
 * SUBSTRING of the content or of any tool name the artifact was observed under. It is never
 * interpreted as FTS5 or SQL syntax: it is bound as a parameter and wrapped as one quoted FTS5
 * phrase with embedded quotes doubled. Queries of three or more code points use the trigram index
 * (a trigram phrase match is exactly a substring match); shorter ones, and any the FTS parser
 * cannot take, scan the content with the same folding (slower, still exact).
 *
 * Indexing is deferred: trigram indexing costs about twenty times a plain INSERT, and `put` is on
 * the agent's hot path while search is a rare recovery call. `put` queues the row in `fts_pending`
 * (same transaction, so the queue is durable and shared by every process); the queue is drained in
 * small batches when the process is idle and completely before any search runs, so search results
 * are always complete.
 */
import type Database from 'better-sqlite3';
import { codePointLength, foldCase } from './identity.js';
import type { ArtifactSummary } from './types.js';

const COLUMNS = `a.artifact_id AS artifactId, a.sha256 AS sha256, a.char_count AS chars, a.byte_count AS bytes,
  a.tool_name AS toolName, a.created_at AS createdAt,
  (SELECT COUNT(*) FROM artifact_observations o WHERE o.artifact_id = a.artifact_id) AS observationCount`;
const BY_TOOL = 'a.artifact_id IN (SELECT t.artifact_id FROM artifact_tools t WHERE instr(t.tool_fold, @needle) > 0)';
const ORDER = 'ORDER BY a.created_at DESC, a.seq DESC LIMIT @limit';
const PENDING_BATCH_ROWS = 32;

/** Quote text as one FTS5 phrase: inside double quotes only `"` is special, and doubling escapes it. */
export function ftsPhrase(text: string): string {
  return `"${text.replace(/"/g, '""')}"`;
}

export interface SearchIndex {
  /** Index queued artifacts until about `budgetBytes` are done. Returns true while more remain. */
  indexPending(budgetBytes: number): boolean;
  /** Drain the queue, then search. */
  search(query: string, limit: number): readonly ArtifactSummary[];
}

/** Prepare the index and search statements on one connection (needs the `tt_fold` SQL function). */
export function createSearchIndex(raw: Database.Database): SearchIndex {
  const pending = raw.prepare(
    `SELECT p.seq AS seq, a.byte_count AS bytes FROM fts_pending p
     JOIN artifacts a ON a.seq = p.seq ORDER BY p.seq LIMIT ${PENDING_BATCH_ROWS}`,
  );
  const contentOf = raw.prepare('SELECT content FROM artifacts WHERE seq = ?').pluck();
  const insertFts = raw.prepare('INSERT INTO artifact_fts (rowid, body) VALUES (?, ?)');
  const done = raw.prepare('DELETE FROM fts_pending WHERE seq = ?');
  const anyPending = raw.prepare('SELECT 1 FROM fts_pending LIMIT 1').pluck();
  const indexed = raw.prepare(
    `SELECT ${COLUMNS} FROM artifacts a
     WHERE a.seq IN (SELECT rowid FROM artifact_fts WHERE artifact_fts MATCH @phrase) OR ${BY_TOOL} ${ORDER}`,
  );
  const scan = raw.prepare(
    `SELECT ${COLUMNS} FROM artifacts a WHERE instr(tt_fold(a.content), @needle) > 0 OR ${BY_TOOL} ${ORDER}`,
  );

  // One IMMEDIATE transaction per batch: rows another process indexed meanwhile are already gone
  // from the queue when we read it, so no row is indexed twice.
  const batch = raw.transaction((budgetBytes: number): boolean => {
    let spent = 0;
    for (const row of pending.all() as { seq: number; bytes: number }[]) {
      if (spent > 0 && spent + row.bytes > budgetBytes) return true;
      spent += row.bytes;
      insertFts.run(row.seq, foldCase(String(contentOf.get(row.seq))));
      done.run(row.seq);
    }
    return anyPending.get() !== undefined;
  });

  const index: SearchIndex = {
    indexPending: (budgetBytes) => batch.immediate(budgetBytes),
    search(query, limit) {
      const needle = foldCase(query.trim());
      if (needle === '') return Object.freeze([]);
      while (anyPending.get() !== undefined) index.indexPending(Number.MAX_SAFE_INTEGER);
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
    },
  };
  return index;
}
