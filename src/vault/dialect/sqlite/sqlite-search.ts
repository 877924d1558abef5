/**
 * Search on SQLite: a contentless FTS5 trigram index over case-folded content, plus an exact scan.
 *
 * Semantics (shared with PostgreSQL): the trimmed query is plain text, matched as a
 * case-insensitive (Unicode-folded) SUBSTRING of the content or of any tool name the artifact was
 * observed under. It is never FTS5 or SQL syntax: it is bound as a parameter and wrapped as one
 * quoted FTS5 phrase with embedded quotes doubled. Needles of three or more code points use the
 * index (a trigram phrase match is exactly a substring match); shorter ones, and any the FTS parser
 * cannot take, scan the content with the same folding (slower, still exact).
 *
 * Indexing is deferred: trigram indexing costs about twenty times a plain INSERT, and `put` is on
 * the agent's hot path while search is a rare recovery call. `put` queues the row in `fts_pending`
 * (same transaction, so the queue is durable and shared by every process); the queue is drained in
 * small batches when the process is idle and completely before any search runs, so search results
 * are always complete.
 */
import { sql, type Kysely } from 'kysely';
import type { SearchIndex } from '../../dialect.js';
import { codePointLength, foldCase } from '../../identity.js';
import { selectSummaries, toSummary } from '../../queries.js';
import type { VaultDatabase } from '../../schema.js';
import type { SqliteStore } from './sqlite-store.js';

const PENDING_BATCH_ROWS = 32;
/** Content bytes indexed per idle step (keeps each step to tens of milliseconds). */
const INDEX_STEP_BYTES = 256 * 1024;
const INDEX_IDLE_MS = 25;

/** Quote text as one FTS5 phrase: inside double quotes only `"` is special, and doubling escapes it. */
export function ftsPhrase(text: string): string {
  return `"${text.replace(/"/g, '""')}"`;
}

export interface SqliteSearchOptions {
  /** Index queued rows in the background while idle. */
  readonly background: boolean;
  readonly busyTimeoutMs: number;
}

export function createSqliteSearch(store: SqliteStore<VaultDatabase>, options: SqliteSearchOptions): SearchIndex {
  const { raw, db } = store;
  raw.function('tt_fold', { deterministic: true }, (s: unknown) => foldCase(String(s ?? '')));
  let closed = false;
  let timer: NodeJS.Timeout | undefined;

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
      const { content } = await trx.selectFrom('artifacts').select('content').where('seq', '=', row.seq).executeTakeFirstOrThrow();
      await sql`INSERT INTO artifact_fts (rowid, body) VALUES (${row.seq}, ${foldCase(String(content))})`.execute(trx);
      await trx.deleteFrom('fts_pending').where('seq', '=', row.seq).execute();
    }
    return (await trx.selectFrom('fts_pending').select('seq').limit(1).executeTakeFirst()) !== undefined;
  };

  const drain = async (): Promise<void> => {
    while ((await db.selectFrom('fts_pending').select('seq').limit(1).executeTakeFirst()) !== undefined) {
      await store.write((trx) => indexBatch(trx, Number.MAX_SAFE_INTEGER));
    }
  };

  /** One idle step; it reschedules itself while the queue has rows. */
  const schedule = (): void => {
    if (timer !== undefined || closed || !options.background) return;
    timer = setTimeout(() => {
      timer = undefined;
      if (closed) return;
      // Never wait for another process's lock here: this is optional work on the event loop.
      void db
        .connection()
        .execute(async (conn) => {
          raw.pragma('busy_timeout = 0');
          try {
            await sql`begin immediate`.execute(conn);
            try {
              const more = await indexBatch(conn, INDEX_STEP_BYTES);
              await sql`commit`.execute(conn);
              return more;
            } catch (error) {
              if (raw.inTransaction) await sql`rollback`.execute(conn).catch(() => undefined);
              throw error;
            }
          } finally {
            raw.pragma(`busy_timeout = ${options.busyTimeoutMs}`);
          }
        })
        .then(
          (more) => more && schedule(),
          // Busy or failing: leave the queue; the next put reschedules, and search drains it anyway.
          () => undefined,
        );
    }, INDEX_IDLE_MS);
    timer.unref();
  };

  const byTool = (needle: string) =>
    db.selectFrom('artifact_tools as t').select('t.artifact_id').where(sql<boolean>`instr(t.tool_fold, ${needle}) > 0`);

  return {
    async added(trx, seq) {
      await trx.insertInto('fts_pending').values({ seq }).execute();
    },
    async removing(trx, seqs) {
      for (const seq of seqs) await sql`DELETE FROM artifact_fts WHERE rowid = ${seq}`.execute(trx);
    },
    async search(needle, limit) {
      await drain();
      const newest = (matches: ReturnType<typeof selectSummaries>) =>
        matches.orderBy('a.created_at', 'desc').orderBy('a.seq', 'desc').limit(limit).execute();
      let rows: Awaited<ReturnType<typeof newest>> | undefined;
      if (codePointLength(needle) >= 3 && !needle.includes('\u0000')) {
        const phrase = ftsPhrase(needle);
        try {
          rows = await newest(
            selectSummaries(db).where((eb) =>
              eb.or([
                eb('a.seq', 'in', sql<number>`(SELECT rowid FROM artifact_fts WHERE artifact_fts MATCH ${phrase})`),
                eb('a.artifact_id', 'in', byTool(needle)),
              ]),
            ),
          );
        } catch {
          rows = undefined; // the FTS parser refused the phrase: fall back to the exact scan below
        }
      }
      rows ??= await newest(
        selectSummaries(db).where((eb) => eb.or([sql<boolean>`instr(tt_fold(a.content), ${needle}) > 0`, eb('a.artifact_id', 'in', byTool(needle))])),
      );
      return Object.freeze(rows.map(toSummary));
    },
    afterPut: schedule,
    close() {
      closed = true;
      if (timer !== undefined) clearTimeout(timer);
    },
  };
}
