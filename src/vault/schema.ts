/**
 * The vault's kysely schema and its one migration path (kysely's Migrator) for both dialects; the
 * column types that differ and the search index come from the dialect's {@link SchemaFlavor}, which also
 * keeps the version, refuses a newer store and migrates under its writer lock (one host creates it).
 */
import {
  Migrator,
  type ColumnDefinitionBuilder,
  type CreateTableBuilder,
  type Generated,
  type Kysely,
  type Migration,
  type MigratorProps,
} from 'kysely';
import { VaultSchemaError } from '../errors.js';
import type { Lockable } from './dialect.js';
import type { StoreEngine } from './ports.js';

/** Schema version this release writes and understands. A larger recorded version is refused. */
export const SCHEMA_VERSION = 4;

/** A column type as kysely's schema builder takes it. */
type DataTypeExpression = Parameters<CreateTableBuilder<string, string>['addColumn']>[1];

/** What differs between dialects in the DDL. */
export interface SchemaFlavor {
  readonly engine: StoreEngine;
  /** Add an auto-incrementing integer primary key column (never reused). */
  serialKey<T extends string, C extends string>(
    table: CreateTableBuilder<T, C>,
    column: string,
  ): CreateTableBuilder<T, C>;
  /** Type of the artifact content column (text on SQLite; bytea on PostgreSQL, whose text cannot hold NUL). */
  readonly contentType: DataTypeExpression;
  /** Type of counters that may pass 2^31 (bytes). */
  readonly bigint: DataTypeExpression;
  /** Create the dialect's search index over artifact content. */
  createSearchIndex(db: Kysely<unknown>): Promise<void>;
}

/** A schema one store holds (the vault, or the ledger): its version, migrations and migration table. */
export interface SchemaSpec {
  /** For messages and the version row: 'vault' or 'ledger'. */
  readonly name: string;
  readonly version: number;
  /** kysely's migration table for this schema (two schemas may share one PostgreSQL database). */
  readonly migrationTable: string;
  migrations(flavor: SchemaFlavor): Readonly<Record<string, Migration>>;
  /**
   * Runs after migrating, in the same transaction, on every open (e.g. recount counters). `lock`
   * adds the dialect's row lock to a select (concurrent writers on PostgreSQL).
   */
  afterMigrate?(db: Kysely<unknown>, lock: <Q extends Lockable<Q>>(query: Q) => Q): Promise<void>;
}

/**
 * Refuse a store written by a newer release, then run the migrations `version` lacks; the caller
 * records the new version (the dialect keeps it beside kysely's migration table).
 */
export async function migrateSchema(
  spec: SchemaSpec,
  flavor: SchemaFlavor,
  location: string,
  version: number,
  options: Omit<MigratorProps, 'provider'>,
): Promise<void> {
  if (version > spec.version) {
    throw new VaultSchemaError(
      `${spec.name} ${location} has schema version ${version}, newer than the supported ${spec.version}; ` +
        `upgrade token-terminator or point it at another ${flavor.engine === 'sqlite' ? 'file' : 'database'}`,
    );
  }
  if (version === spec.version) return;
  const provider = { getMigrations: () => Promise.resolve({ ...spec.migrations(flavor) }) };
  const { error } = await new Migrator({ ...options, provider }).migrateToLatest();
  if (error !== undefined)
    throw new VaultSchemaError(
      `${spec.name} ${location}: migration failed: ${error instanceof Error ? error.message : String(error)}`,
    );
}

export interface VaultDatabase {
  artifacts: {
    /** Auto-incrementing, never reused: stable across VACUUM, and the search index key. */
    seq: Generated<number>;
    artifact_id: string;
    sha256: string;
    char_count: number;
    byte_count: number;
    tool_name: string;
    created_at: string;
    /** Latest observation (ISO-8601 UTC): retention prunes the least recently observed first. */
    last_observed_at: string;
    /** Last column so scans of the small columns above do not touch overflow pages. Text or UTF-8 bytes (dialect). */
    content: string | Uint8Array;
  };
  artifact_observations: {
    id: Generated<number>;
    artifact_id: string;
    session_id: string;
    tool_call_id: string;
    tool_name: string;
    /** Canonical JSON of the tool arguments: private provenance, never shown in receipts. */
    args_json: string;
    args_sha256: string;
    observed_at: string;
  };
  artifact_tools: {
    artifact_id: string;
    tool_name: string;
    /** Case-folded tool name for search. */
    tool_fold: string;
  };
  /**
   * Who may read an artifact, and who pinned it (schema 3). One row per (tenant, session, artifact):
   * written when the session observed the content (put) or was delivered a receipt naming it.
   * Reads and searches with a scope see only artifacts with a row for their tenant and session.
   * `pinned` = 1 while a receipt delivered to the session names it: retention never deletes such
   * an artifact, until the session's pins are released (closed, or idle beyond the TTL).
   */
  artifact_access: {
    tenant: string;
    session_id: string;
    artifact_id: string;
    pinned: number;
    updated_at: string;
  };
  /**
   * Sessions holding pins (schema 3). `epoch` changes whenever the row is created anew, i.e. after
   * retention released the session's pins: a process that memoized deliveries under an older epoch
   * delivers them again before reusing them.
   */
  vault_sessions: {
    tenant: string;
    session_id: string;
    epoch: string;
    last_seen_at: string;
    closed: number;
  };
  artifact_exposures: {
    session_id: string;
    artifact_id: string;
    request_id: string;
    inline: number;
    exposed_at: string;
  };
  terminal_baselines: {
    state_key: string;
    artifact_id: string;
    updated_at: string;
  };
  session_renderings: {
    session_id: string;
    render_key: string;
    value: string;
    updated_at: string;
  };
  request_metrics: {
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
  };
  request_component_metrics: {
    session_id: string;
    request_id: string;
    component: string;
    raw_tokens: number;
    final_tokens: number;
  };
  vault_meta: {
    key: string;
    value: number;
  };
  /** Artifacts stored but not yet in the trigram index (indexing is deferred off the put path). */
  fts_pending: {
    seq: number;
  };
  /** PostgreSQL only: the case-folded copy of each artifact that the trigram index covers. */
  artifact_search: {
    seq: number;
    body: string;
  };
  working_state_entities: {
    session_id: string;
    /** 'node' or 'edge'. */
    entity: string;
    id: string;
    /** Canonical JSON of the entity's fields. */
    body: string;
    active: number;
    created_seq: number;
    updated_seq: number;
  };
  working_state_events: {
    seq: Generated<number>;
    event_id: string;
    session_id: string;
    payload: string;
    created_at: string;
  };
  /** Token counts of large request items under one counter (src/vault/token-counts.ts); a null count is not known. */
  token_counts: {
    counter: string;
    /** SHA-256 (base64) of the item's compact canonical JSON. */
    sha256: string;
    compact_tokens: number | null;
    first_tokens: number | null;
    mid_tokens: number | null;
    last_tokens: number | null;
    only_tokens: number | null;
    alone_tokens: number | null;
    /** When the row was first written (ISO-8601 UTC): rows older than the count TTL are deleted. */
    created_at: string;
  };
}

/** Counter keys in `vault_meta` (O(1) usage without scanning artifacts). */
export const META = {
  bytes: 'artifact_bytes',
  count: 'artifact_count',
  prunedArtifacts: 'pruned_artifacts',
  prunedBytes: 'pruned_bytes',
  /** Sessions whose pins retention released (closed or idle beyond the TTL). */
  releasedSessions: 'released_sessions',
} as const;

const notNull = (c: ColumnDefinitionBuilder): ColumnDefinitionBuilder => c.notNull();

/** 0001: artifacts, provenance, leases, pins, baselines, renderings, metrics, counters, search. */
// long: the first migration is the schema as one list of CREATE statements; released migrations never change
const initial = (f: SchemaFlavor): Migration => ({
  // long: the CREATE statements of the first migration, in dependency order (see `initial`)
  async up(db: Kysely<unknown>): Promise<void> {
    await f
      .serialKey(db.schema.createTable('artifacts'), 'seq')
      .addColumn('artifact_id', 'text', (c) => c.notNull().unique())
      .addColumn('sha256', 'text', (c) => c.notNull().unique())
      .addColumn('char_count', 'integer', notNull)
      .addColumn('byte_count', 'integer', notNull)
      .addColumn('tool_name', 'text', (c) => c.notNull().defaultTo(''))
      .addColumn('created_at', 'text', notNull)
      .addColumn('last_observed_at', 'text', notNull)
      .addColumn('content', f.contentType, notNull)
      .execute();
    await db.schema.createIndex('artifacts_lru').on('artifacts').columns(['last_observed_at', 'seq']).execute();
    await db.schema.createIndex('artifacts_recent').on('artifacts').columns(['created_at', 'seq']).execute();

    await f
      .serialKey(db.schema.createTable('artifact_observations'), 'id')
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
      .addColumn('artifact_id', 'text', (c) => c.primaryKey().references('artifacts.artifact_id').onDelete('cascade'))
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
      .addColumn('value', f.bigint, notNull)
      .execute();

    await f.createSearchIndex(db);
  },
});

/**
 * 0002: the working-state graph, which earlier releases created outside the migrations on the
 * same file (hence IF NOT EXISTS: such a file adopts its tables as they are).
 */
const sessionState = (f: SchemaFlavor): Migration => ({
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('working_state_entities')
      .ifNotExists()
      .addColumn('session_id', 'text', notNull)
      .addColumn('entity', 'text', notNull)
      .addColumn('id', 'text', notNull)
      .addColumn('body', 'text', notNull)
      .addColumn('active', 'integer', notNull)
      .addColumn('created_seq', 'integer', notNull)
      .addColumn('updated_seq', 'integer', notNull)
      .addPrimaryKeyConstraint('working_state_entities_pk', ['session_id', 'entity', 'id'])
      .execute();
    await f
      .serialKey(db.schema.createTable('working_state_events').ifNotExists(), 'seq')
      .addColumn('event_id', 'text', (c) => c.notNull().unique())
      .addColumn('session_id', 'text', notNull)
      .addColumn('payload', 'text', notNull)
      .addColumn('created_at', 'text', notNull)
      .execute();
    await db.schema
      .createIndex('working_state_events_session')
      .ifNotExists()
      .on('working_state_events')
      .column('session_id')
      .execute();
  },
});

/**
 * 0003: per-(tenant, session) access and pins, and the sessions that hold pins. Provenance moves
 * from the observations (tenant '') into `artifact_access`; the global pins of earlier releases
 * become pins of one legacy session ('', '') that ages out like any other.
 */
const scopedPins = (_f: SchemaFlavor): Migration => ({
  async up(raw: Kysely<unknown>): Promise<void> {
    await raw.schema
      .createTable('artifact_access')
      .addColumn('tenant', 'text', notNull)
      .addColumn('session_id', 'text', notNull)
      .addColumn('artifact_id', 'text', (c) => c.notNull().references('artifacts.artifact_id').onDelete('cascade'))
      .addColumn('pinned', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('updated_at', 'text', notNull)
      .addPrimaryKeyConstraint('artifact_access_pk', ['tenant', 'session_id', 'artifact_id'])
      .execute();
    await raw.schema
      .createIndex('access_by_artifact')
      .on('artifact_access')
      .columns(['artifact_id', 'pinned'])
      .execute();
    await raw.schema
      .createTable('vault_sessions')
      .addColumn('tenant', 'text', notNull)
      .addColumn('session_id', 'text', notNull)
      .addColumn('epoch', 'text', notNull)
      .addColumn('last_seen_at', 'text', notNull)
      .addColumn('closed', 'integer', (c) => c.notNull().defaultTo(0))
      .addPrimaryKeyConstraint('vault_sessions_pk', ['tenant', 'session_id'])
      .execute();
    await raw.schema.createIndex('sessions_by_seen').on('vault_sessions').columns(['last_seen_at']).execute();
    await raw.schema.createIndex('exposures_by_session').on('artifact_exposures').column('session_id').execute();
    const db = raw as Kysely<VaultDatabase & { artifact_pins: { artifact_id: string; pinned_at: string } }>;
    const now = new Date().toISOString();
    await db
      .insertInto('artifact_access')
      .columns(['tenant', 'session_id', 'artifact_id', 'pinned', 'updated_at'])
      .expression((eb) =>
        eb
          .selectFrom('artifact_observations')
          .select((s) => [
            s.cast<string>(s.val(''), 'text').as('tenant'),
            'session_id',
            'artifact_id',
            s.lit(0).as('pinned'),
            s.fn.max('observed_at').as('updated_at'),
          ])
          .where('session_id', '<>', '')
          .groupBy(['session_id', 'artifact_id']),
      )
      .execute();
    const legacy = await db.selectFrom('artifact_pins').select('artifact_id').execute();
    if (legacy.length > 0) {
      await db
        .insertInto('vault_sessions')
        .values({ tenant: '', session_id: '', epoch: 'legacy', last_seen_at: now, closed: 0 })
        .execute();
      for (let i = 0; i < legacy.length; i += 200) {
        await db
          .insertInto('artifact_access')
          .values(
            legacy
              .slice(i, i + 200)
              .map((p) => ({ tenant: '', session_id: '', artifact_id: p.artifact_id, pinned: 1, updated_at: now })),
          )
          .onConflict((oc) => oc.columns(['tenant', 'session_id', 'artifact_id']).doUpdateSet({ pinned: 1 }))
          .execute();
      }
    }
    await raw.schema.dropTable('artifact_pins').execute();
  },
});

/** 0004: token counts of large request items, shared by the processes on the store (src/vault/token-counts.ts). */
const tokenCounts = (_f: SchemaFlavor): Migration => ({
  async up(db: Kysely<unknown>): Promise<void> {
    let table = db.schema
      .createTable('token_counts')
      .addColumn('counter', 'text', notNull)
      .addColumn('sha256', 'text', notNull);
    for (const column of ['compact', 'first', 'mid', 'last', 'only', 'alone'])
      table = table.addColumn(`${column}_tokens`, 'integer');
    await table
      .addColumn('created_at', 'text', notNull)
      .addPrimaryKeyConstraint('token_counts_pk', ['counter', 'sha256'])
      .execute();
    await db.schema.createIndex('token_counts_by_age').on('token_counts').column('created_at').execute();
  },
});

/** The vault's schema: every table the vault holds, on either dialect. */
export const VAULT_SCHEMA: SchemaSpec = Object.freeze({
  name: 'vault',
  version: SCHEMA_VERSION,
  migrationTable: 'kysely_migration',
  migrations: (f: SchemaFlavor) => ({
    '0001_initial': initial(f),
    '0002_session_state': sessionState(f),
    '0003_scoped_pins': scopedPins(f),
    '0004_token_counts': tokenCounts(f),
  }),
  // Recount once per open so the O(1) counters can never drift from the rows.
  afterMigrate: recountMeta,
});

/** Set the O(1) counters from the rows (and create the pruning counters at 0 where missing). */
export async function recountMeta(raw: Kysely<unknown>, lock: <Q extends Lockable<Q>>(query: Q) => Q): Promise<void> {
  const db = raw as Kysely<VaultDatabase>;
  // Writers on other hosts update the counters as they commit: hold them while recounting.
  await lock(db.selectFrom('vault_meta').select('key').where('key', 'in', [META.bytes, META.count])).execute();
  const totals = await db
    .selectFrom('artifacts')
    .select((eb) => [
      eb.fn.countAll<number>().as('n'),
      eb.fn.coalesce(eb.fn.sum<number>('byte_count'), eb.lit(0)).as('bytes'),
    ])
    .executeTakeFirstOrThrow();
  await db
    .insertInto('vault_meta')
    .values([
      { key: META.bytes, value: Number(totals.bytes) },
      { key: META.count, value: Number(totals.n) },
    ])
    .onConflict((oc) => oc.column('key').doUpdateSet((eb) => ({ value: eb.ref('excluded.value') })))
    .execute();
  await db
    .insertInto('vault_meta')
    .values([
      { key: META.prunedArtifacts, value: 0 },
      { key: META.prunedBytes, value: 0 },
      { key: META.releasedSessions, value: 0 },
    ])
    .onConflict((oc) => oc.column('key').doNothing())
    .execute();
}
