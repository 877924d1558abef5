/**
 * Search on PostgreSQL with the SQLite search's semantics, over the folded copy in `artifact_search.body`
 * (written in the put transaction): the needle becomes a bound LIKE pattern (`\`, `%`, `_` escaped), which
 * the pg_trgm GIN index answers from three characters on. Text cannot hold NUL (stored as U+FFFD), so a
 * needle with NUL or U+FFFD is re-checked against the exact content. Each statement runs under a
 * `statement_timeout` of the time left; a cancelled one ends the search with `partial`.
 */
import { sql, type Expression, type Kysely } from 'kysely';
import type { SearchIndex } from '../../dialect.js';
import { foldCase } from '../../identity.js';
import type { StoreScope } from '../../ports.js';
import { accessibleIds, selectSummaries, toolMatches, toSummary } from '../../queries.js';
import type { VaultDatabase } from '../../schema.js';
import type { PostgresStore } from './postgres-store.js';
import { decodeContent, pgText } from './postgres-text.js';

const RECHECK_BATCH = 200;

/** A LIKE pattern matching `needle` as a substring. */
export function likePattern(needle: string): string {
  return `%${needle.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/** A statement cancelled by statement_timeout. */
const isCancelled = (error: unknown): boolean => (error as { code?: unknown } | null)?.code === '57014';

export function createPostgresSearch(store: PostgresStore<VaultDatabase>): SearchIndex {
  const db = store.db;
  const matching = (trx: Kysely<VaultDatabase>, stored: string, scope: StoreScope | undefined) => {
    const pattern = likePattern(stored);
    const named = (name: Expression<string>) => sql<boolean>`${name} like ${pattern}`;
    let q = selectSummaries(trx, scope).where((eb) =>
      eb.or([
        eb('a.seq', 'in', eb.selectFrom('artifact_search as s').select('s.seq').where('s.body', 'like', pattern)),
        eb('a.artifact_id', 'in', toolMatches(trx, scope, named)),
      ]),
    );
    if (scope !== undefined) {
      q = q.where('a.artifact_id', 'in', accessibleIds(trx, scope));
    }
    return q.orderBy('a.created_at', 'desc').orderBy('a.seq', 'desc');
  };
  /** Tool names are labels (stored with U+FFFD for NUL), so only the content can prove a NUL needle. */
  const exactMatch = async (artifactId: string, needle: string): Promise<boolean> => {
    const row = await db
      .selectFrom('artifacts')
      .select('content')
      .where('artifact_id', '=', artifactId)
      .executeTakeFirst();
    if (row !== undefined && foldCase(decodeContent(row.content)).includes(needle)) return true;
    const tools = await db
      .selectFrom('artifact_tools')
      .select('tool_fold')
      .where('artifact_id', '=', artifactId)
      .execute();
    return tools.some((t) => t.tool_fold.includes(needle));
  };
  return {
    async added(trx, seq, content) {
      await trx
        .insertInto('artifact_search')
        .values({ seq, body: pgText(foldCase(content)) })
        .execute();
    },
    // artifact_search rows go with their artifact (ON DELETE CASCADE).
    async removing() {},
    async search(needle, limit, bounds) {
      const stored = pgText(needle);
      const out: ReturnType<typeof toSummary>[] = [];
      /** Run one statement under the time left; undefined when the deadline cancelled it (or had passed). */
      const bounded = async <T>(run: (trx: Kysely<VaultDatabase>) => Promise<T>): Promise<T | undefined> => {
        const left = Math.floor(bounds.deadline - bounds.clock());
        if (left <= 0) return undefined;
        try {
          return await db.transaction().execute(async (trx) => {
            await sql`SELECT set_config('statement_timeout', ${String(left)}, true)`.execute(trx);
            return run(trx);
          });
        } catch (error) {
          if (isCancelled(error)) return undefined;
          throw error;
        }
      };
      if (stored === needle && !needle.includes('\ufffd')) {
        const rows = await bounded((trx) => matching(trx, stored, bounds.scope).limit(limit).execute());
        return { rows: (rows ?? []).map(toSummary), partial: rows === undefined };
      }
      for (let offset = 0; out.length < limit; offset += RECHECK_BATCH) {
        const rows = await bounded((trx) =>
          matching(trx, stored, bounds.scope).limit(RECHECK_BATCH).offset(offset).execute(),
        );
        if (rows === undefined) return { rows: out, partial: true };
        for (const row of rows) {
          if (await exactMatch(row.artifactId, needle)) out.push(toSummary(row));
          if (out.length >= limit) break;
        }
        if (rows.length < RECHECK_BATCH) break;
      }
      return { rows: out, partial: false };
    },
    afterPut() {},
    close() {},
  };
}
