/**
 * SQLite's part of the DDL: INTEGER PRIMARY KEY AUTOINCREMENT keys (never reused, so a pruned and
 * re-written artifact gets a new key), content as TEXT, and the contentless FTS5 trigram index
 * with its durable queue (indexing is deferred off the put path, see sqlite-search.ts).
 */
import { sql, type Kysely } from 'kysely';
import type { SchemaFlavor } from '../../schema.js';

export const SQLITE_FLAVOR: SchemaFlavor = Object.freeze({
  engine: 'sqlite',
  serialKey: (table, column) => table.addColumn(column, 'integer', (c) => c.primaryKey().autoIncrement()),
  contentType: 'text',
  bigint: 'integer',
  async createSearchIndex(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('fts_pending')
      .addColumn('seq', 'integer', (c) => c.primaryKey().references('artifacts.seq').onDelete('cascade'))
      .execute();
    // Trigram index over case-folded content (folded in JS, so case_sensitive 1 keeps SQLite from
    // folding a second, different way). Contentless: the content lives once, in `artifacts`.
    await sql`CREATE VIRTUAL TABLE artifact_fts USING fts5(body, tokenize = 'trigram case_sensitive 1', content = '', contentless_delete = 1)`.execute(
      db,
    );
  },
} satisfies SchemaFlavor);
