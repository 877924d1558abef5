/**
 * A PostgreSQL store (the vault, or the ledger) through kysely's PostgresDialect, one `pg` pool per
 * store and process. The schema version lives in `tt_schema_version` beside kysely's migration table,
 * checked and migrated in one transaction under an advisory lock, so of hosts starting at once one
 * migrates. `lock_timeout` is the busy timeout, `statement_timeout` bounds any statement; TLS settings
 * go to `pg` as they are.
 */
import { Kysely, PostgresDialect, sql } from 'kysely';
import type pg from 'pg';
import { TokenTerminatorError } from '../../../errors.js';
import type { VaultOptions } from '../../create.js';
import type { StoreConnection } from '../../dialect.js';
import { redactUrl } from '../../configured.js';
import { VaultOpenError } from '../../errors.js';
import { loadOptionalPackage } from '../../../optional-package.js';
import { migrateSchema, type SchemaSpec } from '../../schema.js';
import { POSTGRES_FLAVOR } from './postgres-flavor.js';

/** What a PostgreSQL store takes of the {@link VaultOptions} (`statementTimeoutMs` 0: no limit). */
export type PostgresStoreOptions = Required<
  Pick<VaultOptions, 'url' | 'busyTimeoutMs' | 'poolSize' | 'statementTimeoutMs'>
> &
  Pick<VaultOptions, 'ssl'>;

export interface PostgresStore<DB> extends StoreConnection<DB> {
  readonly pool: pg.Pool;
  /** The schema the store's tables are in (the first of the search path). */
  readonly schema: string;
}

const INT8 = 20;
const NUMERIC = 1700;

/** Counts and sums come back as numbers (the store's values stay far below 2^53). */
const typesOf = (driver: typeof pg): Pick<typeof pg.types, 'getTypeParser'> => ({
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8 || oid === NUMERIC
      ? (value: string) => Number(value)
      : driver.types.getTypeParser(oid, format ?? 'text')) as typeof pg.types.getTypeParser,
});

/** A pool on `options.url`; `pg` (an optional peer) is required here, on first use. */
export function createPool(options: PostgresStoreOptions): pg.Pool {
  const api = loadOptionalPackage<typeof pg>('pg');
  const types = typesOf(api);
  const pool = new api.Pool({
    connectionString: options.url,
    max: options.poolSize,
    application_name: 'token-terminator',
    lock_timeout: options.busyTimeoutMs,
    ...(options.statementTimeoutMs > 0 ? { statement_timeout: options.statementTimeoutMs } : {}),
    connectionTimeoutMillis: Math.max(1000, options.busyTimeoutMs),
    idleTimeoutMillis: 30_000,
    ...(options.ssl === undefined ? {} : { ssl: options.ssl }),
    types,
  });
  // A connection the server closed or the network cut (restart, reset, admin termination): an idle
  // one is dropped by the pool, a checked-out one fails its query (the stage fails open), and the
  // next query reconnects. Without these listeners the 'error' event would crash the host.
  pool.on('error', () => undefined);
  pool.on('connect', (client) => {
    client.on('error', () => undefined);
    // A receipt is delivered only after its artifact's commit returned: make that commit durable
    // (WAL flushed) even where the server defaults to synchronous_commit = off. pg runs queries
    // on a connection in order, so this precedes every statement of the store.
    client.query('SET synchronous_commit = on').catch(() => undefined);
  });
  return pool;
}

/** Open (creating the tables if needed) and migrate the store for `spec`. */
export async function openPostgresStore<DB>(
  spec: SchemaSpec,
  options: PostgresStoreOptions,
): Promise<PostgresStore<DB>> {
  const location = redactUrl(options.url);
  const pool = createPool(options);
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
  try {
    const { rows } = await sql<{ schema: string | null }>`SELECT current_schema() AS schema`.execute(db);
    const schema = rows[0]?.schema;
    if (schema === null || schema === undefined) {
      throw new VaultOpenError(`${spec.name} ${location}: no schema on the search path to create the tables in`, {
        path: location,
        reason: 'no_schema',
      });
    }
    await migrate(spec, db as Kysely<unknown>, schema, location);
    return {
      engine: 'postgres',
      db,
      pool,
      schema,
      location,
      // Lock waits draw from the call's budget: once less than 90 % of a busy timeout is left, the
      // transaction's lock_timeout is what is left (so one call waits about one busy timeout in
      // all, not one per statement); every transaction's time is taken from the budget.
      write: async (fn, budget) => {
        const started = Date.now();
        try {
          return await db.transaction().execute(async (trx) => {
            if (budget !== undefined && budget.remainingMs < options.busyTimeoutMs * 0.9) {
              await sql`SELECT set_config('lock_timeout', ${String(Math.max(1, Math.floor(budget.remainingMs)))}, true)`.execute(
                trx,
              );
            }
            return fn(trx);
          });
        } finally {
          if (budget !== undefined) {
            const spent = Date.now() - started;
            budget.remainingMs = Math.max(0, budget.remainingMs - spent);
            budget.waitedMs = (budget.waitedMs ?? 0) + spent;
          }
        }
      },
      lock: (query, strength, skipLocked = false) => {
        const locked = strength === 'claim' ? query.forNoKeyUpdate() : query.forUpdate();
        return skipLocked ? locked.skipLocked() : locked;
      },
      destroy: () => db.destroy(),
    };
  } catch (error) {
    await db.destroy().catch(() => undefined);
    throw error instanceof TokenTerminatorError ? error : VaultOpenError.wrap(location, error);
  }
}

async function migrate(spec: SchemaSpec, db: Kysely<unknown>, schema: string, location: string): Promise<void> {
  // One connection and one transaction for all of it (kysely's Migrator pins a connection itself,
  // which a kysely Transaction refuses, so the transaction is opened by hand on that connection).
  await db.connection().execute(async (trx) => {
    await sql`BEGIN`.execute(trx);
    try {
      await sql`SELECT pg_advisory_xact_lock(hashtext(${`token-terminator:${schema}`}))`.execute(trx);
      await trx.schema
        .createTable('tt_schema_version')
        .ifNotExists()
        .addColumn('name', 'text', (c) => c.primaryKey())
        .addColumn('version', 'integer', (c) => c.notNull())
        .execute();
      const versions = trx as unknown as Kysely<{ tt_schema_version: { name: string; version: number } }>;
      const row = await versions
        .selectFrom('tt_schema_version')
        .select('version')
        .where('name', '=', spec.name)
        .executeTakeFirst();
      const version = row?.version ?? 0;
      await migrateSchema(spec, POSTGRES_FLAVOR, location, version, {
        db: trx,
        disableTransactions: true,
        migrationTableName: spec.migrationTable,
        migrationLockTableName: `${spec.migrationTable}_lock`,
        migrationTableSchema: schema,
      });
      if (version < spec.version) {
        await versions
          .insertInto('tt_schema_version')
          .values({ name: spec.name, version: spec.version })
          .onConflict((oc) => oc.column('name').doUpdateSet({ version: spec.version }))
          .execute();
      }
      await spec.afterMigrate?.(trx, (query) => query.forUpdate());
      await sql`COMMIT`.execute(trx);
    } catch (error) {
      await sql`ROLLBACK`.execute(trx).catch(() => undefined);
      throw error;
    }
  });
}
