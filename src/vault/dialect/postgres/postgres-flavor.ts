/**
 * PostgreSQL's part of the DDL: bigserial keys, content as bytea (PostgreSQL text cannot hold NUL,
 * and bytea round-trips the exact UTF-8 bytes), 64-bit counters, and the search index: a
 * case-folded copy of each artifact (`artifact_search.body`, folded in JS exactly as on SQLite)
 * under a pg_trgm GIN index. pg_trgm is a trusted extension: a database owner may create it.
 */
import { sql, type Kysely } from 'kysely';
import type { SchemaFlavor } from '../../schema.js';

/** The schema pg_trgm lives in (created in the first schema of the search path when missing). */
async function trigramSchema(db: Kysely<unknown>): Promise<string> {
  await sql`CREATE EXTENSION IF NOT EXISTS pg_trgm`.execute(db);
  const { rows } = await sql<{
    schema: string;
  }>`SELECT n.nspname AS schema FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm'`.execute(
    db,
  );
  const schema = rows[0]?.schema;
  if (schema === undefined) throw new Error('pg_trgm is not installed');
  return schema;
}

export const POSTGRES_FLAVOR: SchemaFlavor = Object.freeze({
  engine: 'postgres',
  serialKey: (table, column) => table.addColumn(column, 'bigserial', (c) => c.primaryKey()),
  contentType: 'bytea',
  bigint: 'bigint',
  async createSearchIndex(db: Kysely<unknown>): Promise<void> {
    const trgm = await trigramSchema(db);
    await db.schema
      .createTable('artifact_search')
      .addColumn('seq', 'bigint', (c) => c.primaryKey().references('artifacts.seq').onDelete('cascade'))
      .addColumn('body', 'text', (c) => c.notNull())
      .execute();
    await sql`CREATE INDEX artifact_search_trgm ON artifact_search USING gin (body ${sql.id(trgm)}.gin_trgm_ops)`.execute(
      db,
    );
    await sql`CREATE INDEX artifact_tools_trgm ON artifact_tools USING gin (tool_fold ${sql.id(trgm)}.gin_trgm_ops)`.execute(
      db,
    );
  },
} satisfies SchemaFlavor);
