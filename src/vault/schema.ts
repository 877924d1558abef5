/**
 * The vault's kysely schema and migrations (inline provider).
 *
 * `PRAGMA user_version` records the schema version next to kysely's migration table, so a database
 * written by a newer release is refused before the Migrator (which would only see unknown names) runs.
 * The caller runs the whole migration inside one `BEGIN IMMEDIATE`, so several processes opening a new
 * file at once serialize on it and exactly one of them creates the tables.
 */
import { sql, type Kysely, type Migration, type MigrationProvider } from 'kysely';

/** Schema version this release writes and understands. A larger `user_version` is refused. */
export const SCHEMA_VERSION = 1;

export interface ArtifactsTable {
  /** INTEGER PRIMARY KEY AUTOINCREMENT: stable across VACUUM, never reused, and the FTS rowid. */
  seq: number;
  artifact_id: string;
  sha256: string;
  char_count: number;
  byte_count: number;
  tool_name: string;
  created_at: string;
  /** Latest observation (ISO-8601 UTC): retention prunes the least recently observed first. */
  last_observed_at: string;
  /** Last column so scans of the small columns above do not touch overflow pages. */
  content: string;
}

export interface ObservationsTable {
  id: number;
  artifact_id: string;
  session_id: string;
  tool_call_id: string;
  tool_name: string;
  /** Canonical JSON of the tool arguments: private provenance, never shown in receipts. */
  args_json: string;
  args_sha256: string;
  observed_at: string;
}

export interface ArtifactToolsTable {
  artifact_id: string;
  tool_name: string;
  /** Case-folded tool name for search. */
  tool_fold: string;
}

export interface PinsTable {
  artifact_id: string;
  pinned_at: string;
}

export interface ExposuresTable {
  session_id: string;
  artifact_id: string;
  request_id: string;
  inline: number;
  exposed_at: string;
}

export interface BaselinesTable {
  state_key: string;
  artifact_id: string;
  updated_at: string;
}

export interface RenderingsTable {
  session_id: string;
  render_key: string;
  value: string;
  updated_at: string;
}

export interface RequestMetricsTable {
  session_id: string;
  request_id: string;
  mode: string;
  model: string | null;
  raw_chars: number;
  final_chars: number;
  raw_tokens: number | null;
  final_tokens: number | null;
  tokenizer: string | null;
  receipts: number;
  failed_open: number;
  saved_by_stage_json: string;
  created_at: string;
  updated_at: string;
}

export interface ComponentMetricsTable {
  session_id: string;
  request_id: string;
  component: string;
  raw_tokens: number;
  final_tokens: number;
}

/** Artifacts stored but not yet in the trigram index (indexing is deferred off the put path). */
export interface FtsPendingTable {
  seq: number;
}

export interface MetaTable {
  key: string;
  value: number;
}

export interface VaultDatabase {
  artifacts: ArtifactsTable;
  artifact_observations: ObservationsTable;
  artifact_tools: ArtifactToolsTable;
  artifact_pins: PinsTable;
  artifact_exposures: ExposuresTable;
  terminal_baselines: BaselinesTable;
  session_renderings: RenderingsTable;
  request_metrics: RequestMetricsTable;
  request_component_metrics: ComponentMetricsTable;
  vault_meta: MetaTable;
  fts_pending: FtsPendingTable;
}

/** Counter keys in `vault_meta` (O(1) usage without scanning artifacts). */
export const META = {
  bytes: 'artifact_bytes',
  count: 'artifact_count',
  prunedArtifacts: 'pruned_artifacts',
  prunedBytes: 'pruned_bytes',
} as const;

const initial: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('artifacts')
      .addColumn('seq', 'integer', (c) => c.primaryKey().autoIncrement())
      .addColumn('artifact_id', 'text', (c) => c.notNull().unique())
      .addColumn('sha256', 'text', (c) => c.notNull().unique())
      .addColumn('char_count', 'integer', (c) => c.notNull())
      .addColumn('byte_count', 'integer', (c) => c.notNull())
      .addColumn('tool_name', 'text', (c) => c.notNull().defaultTo(''))
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('last_observed_at', 'text', (c) => c.notNull())
      .addColumn('content', 'text', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('artifacts_lru').on('artifacts').columns(['last_observed_at', 'seq']).execute();
    await db.schema.createIndex('artifacts_recent').on('artifacts').columns(['created_at', 'seq']).execute();

    await db.schema
      .createTable('artifact_observations')
      .addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement())
      .addColumn('artifact_id', 'text', (c) => c.notNull().references('artifacts.artifact_id').onDelete('cascade'))
      .addColumn('session_id', 'text', (c) => c.notNull().defaultTo(''))
      .addColumn('tool_call_id', 'text', (c) => c.notNull().defaultTo(''))
      .addColumn('tool_name', 'text', (c) => c.notNull().defaultTo(''))
      .addColumn('args_json', 'text', (c) => c.notNull().defaultTo('{}'))
      .addColumn('args_sha256', 'text', (c) => c.notNull())
      .addColumn('observed_at', 'text', (c) => c.notNull())
      .addUniqueConstraint('observation_identity', [
        'artifact_id',
        'session_id',
        'tool_call_id',
        'tool_name',
        'args_sha256',
      ])
      .execute();

    await db.schema
      .createTable('artifact_tools')
      .addColumn('artifact_id', 'text', (c) => c.notNull().references('artifacts.artifact_id').onDelete('cascade'))
      .addColumn('tool_name', 'text', (c) => c.notNull())
      .addColumn('tool_fold', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('artifact_tools_pk', ['artifact_id', 'tool_name'])
      .execute();

    await db.schema
      .createTable('artifact_pins')
      .addColumn('artifact_id', 'text', (c) =>
        c.primaryKey().references('artifacts.artifact_id').onDelete('cascade'),
      )
      .addColumn('pinned_at', 'text', (c) => c.notNull())
      .execute();

    // No cascade: an exposed artifact is never pruned, so a delete that would orphan a lease fails.
    await db.schema
      .createTable('artifact_exposures')
      .addColumn('session_id', 'text', (c) => c.notNull())
      .addColumn('artifact_id', 'text', (c) => c.notNull().references('artifacts.artifact_id'))
      .addColumn('request_id', 'text', (c) => c.notNull())
      .addColumn('inline', 'integer', (c) => c.notNull())
      .addColumn('exposed_at', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('artifact_exposures_pk', ['session_id', 'artifact_id', 'request_id'])
      .execute();
    await db.schema.createIndex('exposures_by_artifact').on('artifact_exposures').column('artifact_id').execute();

    await db.schema
      .createTable('terminal_baselines')
      .addColumn('state_key', 'text', (c) => c.primaryKey())
      .addColumn('artifact_id', 'text', (c) => c.notNull().references('artifacts.artifact_id'))
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('baselines_by_artifact').on('terminal_baselines').column('artifact_id').execute();

    await db.schema
      .createTable('session_renderings')
      .addColumn('session_id', 'text', (c) => c.notNull())
      .addColumn('render_key', 'text', (c) => c.notNull())
      .addColumn('value', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('session_renderings_pk', ['session_id', 'render_key'])
      .execute();

    await db.schema
      .createTable('request_metrics')
      .addColumn('session_id', 'text', (c) => c.notNull())
      .addColumn('request_id', 'text', (c) => c.notNull())
      .addColumn('mode', 'text', (c) => c.notNull())
      .addColumn('model', 'text')
      .addColumn('raw_chars', 'integer', (c) => c.notNull())
      .addColumn('final_chars', 'integer', (c) => c.notNull())
      .addColumn('raw_tokens', 'integer')
      .addColumn('final_tokens', 'integer')
      .addColumn('tokenizer', 'text')
      .addColumn('receipts', 'integer', (c) => c.notNull())
      .addColumn('failed_open', 'integer', (c) => c.notNull())
      .addColumn('saved_by_stage_json', 'text', (c) => c.notNull().defaultTo('{}'))
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('request_metrics_pk', ['session_id', 'request_id'])
      .execute();

    await db.schema
      .createTable('request_component_metrics')
      .addColumn('session_id', 'text', (c) => c.notNull())
      .addColumn('request_id', 'text', (c) => c.notNull())
      .addColumn('component', 'text', (c) => c.notNull())
      .addColumn('raw_tokens', 'integer', (c) => c.notNull())
      .addColumn('final_tokens', 'integer', (c) => c.notNull())
      .addPrimaryKeyConstraint('request_component_metrics_pk', ['session_id', 'request_id', 'component'])
      .addForeignKeyConstraint(
        'component_metric_request',
        ['session_id', 'request_id'],
        'request_metrics',
        ['session_id', 'request_id'],
        (fk) => fk.onDelete('cascade'),
      )
      .execute();

    await db.schema
      .createTable('vault_meta')
      .addColumn('key', 'text', (c) => c.primaryKey())
      .addColumn('value', 'integer', (c) => c.notNull())
      .execute();

    // Trigram index over case-folded content (folded in JS, so case_sensitive 1 keeps SQLite from
    // folding a second, different way). Contentless: the content lives once, in `artifacts`.
    await db.schema
      .createTable('fts_pending')
      .addColumn('seq', 'integer', (c) => c.primaryKey().references('artifacts.seq').onDelete('cascade'))
      .execute();
    await sql`CREATE VIRTUAL TABLE artifact_fts USING fts5(body, tokenize = 'trigram case_sensitive 1', content = '', contentless_delete = 1)`.execute(
      db,
    );
    await sql.raw(`PRAGMA user_version = ${SCHEMA_VERSION}`).execute(db);
  },
};

/** Inline provider: migrations ship with the code, never read from disk. */
export const migrationProvider: MigrationProvider = {
  getMigrations: () => Promise.resolve({ '0001_initial': initial }),
};
