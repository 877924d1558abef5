/**
 * Search on SQLite: a contentless FTS5 trigram index over case-folded content, plus exact scans.
 *
 * Semantics (shared with PostgreSQL): the trimmed query is plain text, matched as a
 * case-insensitive (Unicode-folded) SUBSTRING of the content or of any tool name the artifact was
 * observed under. It is never FTS5 or SQL syntax: it is bound as a parameter and wrapped as one
 * quoted FTS5 phrase with embedded quotes doubled. A trigram phrase match is exactly a substring
 * match, so needles of 3…{@link INDEX_PHRASE_MAX} code points are answered by the index alone;
 * for a longer needle the index is asked for its first {@link INDEX_PHRASE_MAX} code points and
 * the candidates are checked against their content; shorter ones, and any the FTS parser cannot
 * take, scan the content with the same folding (slower, still exact).
 *
 * Bounded work: better-sqlite3 runs every statement on the event loop, so search never runs one
 * long statement. The index phrase is at most {@link INDEX_PHRASE_MAX} code points (an FTS5 phrase
 * costs in proportion to its length times the occurrences of its trigrams), candidate rows are read
 * one at a time and folded in JS, and the search yields to the event loop after every
 * {@link SCAN_SLICE_BYTES} of content. At the deadline it returns what it found with `partial`.
 *
 * Indexing is deferred: trigram indexing costs about twenty times a plain INSERT, and `put` is on
 * the agent's hot path while search is a rare recovery call. `put` queues the row in `fts_pending`
 * (same transaction, so the queue is durable and shared by every process); the queue is indexed in
 * small steps while the process is idle, and by search in steps with a yield between them, never
 * waiting for another process's lock; the idle steps wait until no reduction is in flight
 * (src/vault/idle.ts), so they are never part of a request's time. Rows still queued are scanned exactly, so results stay
 * complete unless the deadline cuts them short.
 */
import { sql, type Kysely } from 'kysely';
import type { SearchIndex } from '../../dialect.js';
import { codePointLength, foldCase } from '../../identity.js';
import type { StoreScope } from '../../ports.js';
import { prepared } from '../../prepared.js';
import { accessibleIds, selectSummaries, toSummary } from '../../queries.js';
import type { VaultDatabase } from '../../schema.js';
import type { ArtifactSummary } from '../../types.js';
import type { SqliteStore } from './sqlite-store.js';

const PENDING_BATCH_ROWS = 32;
/** Content bytes indexed per step (one artifact at least): keeps each step to tens of milliseconds per MB. */
const INDEX_STEP_BYTES = 256 * 1024;
/** Longest phrase given to the index (code points); longer needles are checked against candidates' content. */
export const INDEX_PHRASE_MAX = 24;
/** Content folded and scanned between two yields to the event loop. */
export const SCAN_SLICE_BYTES = 1024 * 1024;
/** Rows of light columns read per candidate page. */
const PAGE_ROWS = 256;

/** Quote text as one FTS5 phrase: inside double quotes only `"` is special, and doubling escapes it. */
export function ftsPhrase(text: string): string {
  return `"${text.replace(/"/g, '""')}"`;
}

export interface SqliteSearchOptions {
  /** Index queued rows in the background while idle. */
  readonly background: boolean;
}

const yieldTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** The first `n` code points of `s`. */
function headCodePoints(s: string, n: number): string {
  let out = '';
  let k = 0;
  for (const ch of s) {
    if (k++ >= n) break;
    out += ch;
  }
  return out;
}

/** A new artifact queued for indexing (every put of new content): compiled once per connection. */
const queueForIndex = prepared((store: SqliteStore<VaultDatabase>, seq: number) =>
  store.db.insertInto('fts_pending').values({ seq }),
);

export function createSqliteSearch(store: SqliteStore<VaultDatabase>, options: SqliteSearchOptions): SearchIndex {
  const { raw, db } = store;
  raw.function('tt_fold', { deterministic: true }, (s: unknown) => foldCase(String(s ?? '')));
  let closed = false;

  /** One batch in one IMMEDIATE transaction: rows another process indexed meanwhile are gone from the queue. */
  const indexBatch = async (trx: Kysely<VaultDatabase>, budgetBytes: number): Promise<boolean> => {
    const rows = await trx
      .selectFrom('fts_pending as p')
      .innerJoin('artifacts as a', 'a.seq', 'p.seq')
      .select(['p.seq as seq', 'a.byte_count as bytes'])
      .orderBy('p.seq')
      .limit(PENDING_BATCH_ROWS)
      .execute();
    let spent = 0;
    for (const row of rows) {
      if (spent > 0 && spent + row.bytes > budgetBytes) return true;
      spent += row.bytes;
      const { content } = await trx
        .selectFrom('artifacts')
        .select('content')
        .where('seq', '=', row.seq)
        .executeTakeFirstOrThrow();
      await sql`INSERT INTO artifact_fts (rowid, body) VALUES (${row.seq}, ${foldCase(String(content))})`.execute(trx);
      await trx.deleteFrom('fts_pending').where('seq', '=', row.seq).execute();
    }
    return (await trx.selectFrom('fts_pending').select('seq').limit(1).executeTakeFirst()) !== undefined;
  };

  /** One step of indexing; never waits for another process's lock (busy: false, try later). */
  const indexStep = (): Promise<boolean> =>
    store.write((trx) => indexBatch(trx, INDEX_STEP_BYTES), { remainingMs: 0 }).catch(() => false);

  /** One idle step; it queues the next while the queue has rows. */
  const idleStep = (): void => {
    if (closed) return;
    // Busy or failing: leave the queue; the next put reschedules, and search scans it anyway.
    void indexStep().then((more) => more && schedule());
  };
  /** Index when the process is idle (no reduction in flight, the store quiet): see src/vault/idle.ts. */
  const schedule = (): void => {
    if (closed || !options.background) return;
    store.idle?.defer(idleStep);
  };

  const accessible = (scope: StoreScope) => accessibleIds(db, scope);

  /** Light columns of the rows `seqs` (newest first) visible to the scope. */
  const rowsOf = async (seqs: readonly number[], scope: StoreScope | undefined) => {
    let q = db
      .selectFrom('artifacts as a')
      .select(['a.seq as seq', 'a.byte_count as bytes'])
      .where('a.seq', 'in', seqs);
    if (scope !== undefined) q = q.where('a.artifact_id', 'in', accessible(scope));
    return (await q.orderBy('a.seq', 'desc').execute()).map((r) => ({ seq: Number(r.seq), bytes: Number(r.bytes) }));
  };

  /** The next page of every row older than `below`, visible to the scope (the short-needle scan). */
  const pageBelow = async (below: number, scope: StoreScope | undefined) => {
    let q = db
      .selectFrom('artifacts as a')
      .select(['a.seq as seq', 'a.byte_count as bytes'])
      .where('a.seq', '<', below);
    if (scope !== undefined) q = q.where('a.artifact_id', 'in', accessible(scope));
    return (await q.orderBy('a.seq', 'desc').limit(PAGE_ROWS).execute()).map((r) => ({
      seq: Number(r.seq),
      bytes: Number(r.bytes),
    }));
  };

  return {
    async added(trx, seq) {
      await queueForIndex.execute(store, trx, seq);
    },
    async removing(trx, seqs) {
      for (const seq of seqs) await sql`DELETE FROM artifact_fts WHERE rowid = ${seq}`.execute(trx);
    },
    async search(needle, limit, bounds) {
      const expired = (): boolean => bounds.clock() >= bounds.deadline;
      // Index what is queued, a step at a time, for at most half of the time left.
      const drainUntil = bounds.clock() + (bounds.deadline - bounds.clock()) / 2;
      while (bounds.clock() < drainUntil && (await indexStep())) await yieldTurn();

      const length = codePointLength(needle);
      const phrase = length >= 3 && !needle.includes('\u0000') ? headCodePoints(needle, INDEX_PHRASE_MAX) : undefined;
      let indexed: Set<number> | undefined;
      if (phrase !== undefined) {
        try {
          const hits = await sql<{
            rowid: number;
          }>`SELECT rowid FROM artifact_fts WHERE artifact_fts MATCH ${ftsPhrase(phrase)}`.execute(db);
          indexed = new Set(hits.rows.map((r) => Number(r.rowid)));
        } catch {
          indexed = undefined; // the FTS parser refused the phrase: scan everything below
        }
      }
      const exactByIndex = indexed !== undefined && length <= INDEX_PHRASE_MAX;
      const toolRows = await db
        .selectFrom('artifact_tools as t')
        .innerJoin('artifacts as a', 'a.artifact_id', 't.artifact_id')
        .select('a.seq as seq')
        .where(sql<boolean>`instr(t.tool_fold, ${needle}) > 0`)
        .execute();
      const byTool = new Set(toolRows.map((r) => Number(r.seq)));

      const found: number[] = [];
      let scanned = 0;
      let partial = false;
      /** Decide one candidate; false when the search must stop (limit or deadline). */
      const consider = async (row: { seq: number; bytes: number }): Promise<boolean> => {
        if (found.length >= limit) return false;
        let hit = byTool.has(row.seq) || (exactByIndex && indexed!.has(row.seq));
        if (!hit) {
          if (expired()) {
            partial = true;
            return false;
          }
          const r = await db.selectFrom('artifacts').select('content').where('seq', '=', row.seq).executeTakeFirst();
          hit = r !== undefined && foldCase(String(r.content)).includes(needle);
          scanned += row.bytes;
          if (scanned >= SCAN_SLICE_BYTES) {
            scanned = 0;
            await yieldTurn();
          }
        }
        if (hit) found.push(row.seq);
        return found.length < limit;
      };

      if (indexed !== undefined) {
        // Candidates: index hits, tool matches and rows not indexed yet, newest first.
        const pending = (await db.selectFrom('fts_pending').select('seq').execute()).map((r) => Number(r.seq));
        const all = [...new Set([...indexed, ...byTool, ...pending])].sort((a, b) => b - a);
        outer: for (let i = 0; i < all.length; i += PAGE_ROWS) {
          for (const row of await rowsOf(all.slice(i, i + PAGE_ROWS), bounds.scope))
            if (!(await consider(row))) break outer;
        }
      } else {
        let below = Number.MAX_SAFE_INTEGER;
        outer: for (;;) {
          const page = await pageBelow(below, bounds.scope);
          if (page.length === 0) break;
          for (const row of page) if (!(await consider(row))) break outer;
          below = page[page.length - 1]!.seq;
        }
      }
      if (found.length === 0) return { rows: [], partial };
      const rows = await selectSummaries(db)
        .where('a.seq', 'in', found)
        .orderBy('a.created_at', 'desc')
        .orderBy('a.seq', 'desc')
        .execute();
      return { rows: rows.map(toSummary) as ArtifactSummary[], partial };
    },
    afterPut: schedule,
    close() {
      closed = true;
    },
  };
}
