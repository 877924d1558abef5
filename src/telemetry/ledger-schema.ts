/**
 * The experiment ledger's kysely schema, migrated by the same path as the vault's (SchemaSpec,
 * inline provider, version checked by the dialect). Earlier releases created these tables with
 * raw DDL, hence IF NOT EXISTS: such a ledger file adopts its tables as they are.
 */
import type { ColumnDefinitionBuilder, ColumnType, Kysely, Migration, Selectable } from 'kysely';
import type { SchemaSpec } from '../vault/schema.js';

export interface LedgerMetaTable {
  key: string;
  value: string;
}

/** The token columns both tables sum. */
const COUNTS = [
  'input_tokens',
  'output_tokens',
  'cache_read_tokens',
  'cache_write_tokens',
  'reasoning_tokens',
  'requests',
  'raw_tokens',
  'final_tokens',
] as const;

/** Columns with a default: optional on insert. */
type Defaulted<K extends string> = Record<K, ColumnType<number, number | undefined, number>>;

export interface LedgerSessionsTable extends Defaulted<
  (typeof COUNTS)[number] | 'contaminated' | 'turn_count' | 'completed_turns' | 'failed_turns' | 'interrupted_turns'
> {
  session_id: string;
  experiment: string;
  mode: string;
  initial_model: string | null;
  last_model: string | null;
  contamination_reason: string | null;
  tagged_at: string;
  last_seen_at: string;
}

export interface LedgerTurnsTable extends Defaulted<(typeof COUNTS)[number]> {
  session_id: string;
  turn_id: string;
  seq: number;
  mode: string;
  model: string | null;
  prompt_fingerprint: string | null;
  started_at: string;
  ended_at: string | null;
  outcome: string | null;
}

export interface LedgerDatabase {
  meta: LedgerMetaTable;
  sessions: LedgerSessionsTable;
  turns: LedgerTurnsTable;
}

export type SessionRow = Selectable<LedgerSessionsTable>;

const notNull = (c: ColumnDefinitionBuilder): ColumnDefinitionBuilder => c.notNull();
const zero = (c: ColumnDefinitionBuilder): ColumnDefinitionBuilder => c.notNull().defaultTo(0);

const initial: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema
      .createTable('meta')
      .ifNotExists()
      .addColumn('key', 'text', (c) => c.primaryKey())
      .addColumn('value', 'text', notNull)
      .execute();
    let sessions = db.schema
      .createTable('sessions')
      .ifNotExists()
      .addColumn('session_id', 'text', (c) => c.primaryKey())
      .addColumn('experiment', 'text', notNull)
      .addColumn('mode', 'text', notNull)
      .addColumn('initial_model', 'text')
      .addColumn('last_model', 'text')
      .addColumn('contaminated', 'integer', zero)
      .addColumn('contamination_reason', 'text')
      .addColumn('tagged_at', 'text', notNull)
      .addColumn('last_seen_at', 'text', notNull)
      .addColumn('turn_count', 'integer', zero)
      .addColumn('completed_turns', 'integer', zero)
      .addColumn('failed_turns', 'integer', zero)
      .addColumn('interrupted_turns', 'integer', zero);
    for (const c of COUNTS) sessions = sessions.addColumn(c, 'bigint', zero);
    await sessions.execute();
    let turns = db.schema
      .createTable('turns')
      .ifNotExists()
      .addColumn('session_id', 'text', (c) => c.notNull().references('sessions.session_id').onDelete('cascade'))
      .addColumn('turn_id', 'text', notNull)
      .addColumn('seq', 'integer', notNull)
      .addColumn('mode', 'text', notNull)
      .addColumn('model', 'text')
      .addColumn('prompt_fingerprint', 'text')
      .addColumn('started_at', 'text', notNull)
      .addColumn('ended_at', 'text')
      .addColumn('outcome', 'text');
    for (const c of COUNTS) turns = turns.addColumn(c, 'bigint', zero);
    await turns.addPrimaryKeyConstraint('turns_pk', ['session_id', 'turn_id']).execute();
    await db.schema
      .createIndex('sessions_by_mode')
      .ifNotExists()
      .on('sessions')
      .columns(['experiment', 'mode', 'contaminated'])
      .execute();
    await db.schema
      .createIndex('turns_by_fingerprint')
      .ifNotExists()
      .on('turns')
      .columns(['prompt_fingerprint', 'mode', 'model'])
      .execute();
  },
};

export const LEDGER_SCHEMA: SchemaSpec = Object.freeze({
  name: 'ledger',
  version: 1,
  migrationTable: 'ledger_migration',
  migrations: () => ({ '0001_ledger': initial }),
});
