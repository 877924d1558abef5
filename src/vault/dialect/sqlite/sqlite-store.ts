/**
 * Opening a SQLite store file (the vault, or the ledger): private permissions, pragmas, WAL
 * negotiation with retries, and the schema's migrations under `BEGIN IMMEDIATE`, with the schema
 * version in `PRAGMA user_version`. One better-sqlite3 connection per store; kysely's SQLite driver
 * serializes every query on it, and {@link SqliteStore.write} holds it for a whole transaction.
 *
 * Every failure on the way is a VaultOpenError (code E_VAULT_OPEN, the path and a reason code),
 * except a newer schema (VaultSchemaError).
 */
import { chmodSync, closeSync, existsSync, mkdirSync, openSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { Kysely, Migrator, SqliteDialect, sql } from 'kysely';
import { TokenTerminatorError, VaultSchemaError } from '../../../errors.js';
import type { StoreConnection } from '../../dialect.js';
import { VaultOpenError } from '../../errors.js';
import type { SchemaSpec } from '../../schema.js';
import { SQLITE_FLAVOR } from './sqlite-flavor.js';

export const MEMORY_PATH = ':memory:';

/** SQLITE_BUSY / SQLITE_LOCKED and their extended codes: another process holds a lock for a moment. */
export function isTransientLock(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^SQLITE_(BUSY|LOCKED)/.test(code);
}

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * Retry `fn` while it fails with a transient lock, backing off 10 ms → 250 ms until `deadlineMs`.
 * Needed at setup: switching a fresh file to WAL while other processes do the same can report
 * SQLITE_BUSY without consulting the busy handler.
 */
export function retryTransient<T>(fn: () => T, deadlineMs: number): T {
  const until = Date.now() + deadlineMs;
  let wait = 10;
  for (;;) {
    try {
      return fn();
    } catch (error) {
      if (!isTransientLock(error) || Date.now() + wait > until) throw error;
      sleepSync(wait);
      wait = Math.min(250, wait * 2);
    }
  }
}

/** Set a file to 0600 when it exists (best effort: a file owned by someone else stays as it is). */
function privateFile(path: string): void {
  try {
    if (existsSync(path)) chmodSync(path, 0o600);
  } catch {
    // Not ours to change; SQLite still opens it.
  }
}

/** Create the parent directory 0700 (a pre-existing directory keeps its mode) and the file 0600. */
function preparePath(file: string): void {
  const dir = dirname(file);
  if (!existsSync(dir)) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    chmodSync(dir, 0o700);
  }
  // Create the file ourselves with 0600 so there is no window in which SQLite made it umask-wide.
  closeSync(openSync(file, 'a', 0o600));
  privateFile(file);
}

/** Re-apply 0600 to the WAL side files, which SQLite creates lazily. */
export function privateSideFiles(file: string): void {
  if (file === MEMORY_PATH) return;
  privateFile(`${file}-wal`);
  privateFile(`${file}-shm`);
}

export interface SqliteStoreOptions {
  /** The file (its directory is created 0700, the file 0600), or ':memory:'. */
  readonly path: string;
  readonly busyTimeoutMs: number;
}

export interface SqliteStore<DB> extends StoreConnection<DB> {
  readonly raw: Database.Database;
}

/** Open (creating if needed) and migrate a store file for `spec`. */
export async function openSqliteStore<DB>(spec: SchemaSpec, options: SqliteStoreOptions): Promise<SqliteStore<DB>> {
  const file = options.path === MEMORY_PATH ? MEMORY_PATH : resolve(options.path);
  let raw: Database.Database | undefined;
  let db: Kysely<DB> | undefined;
  try {
    if (file !== MEMORY_PATH) preparePath(file);
    raw = new Database(file, { timeout: options.busyTimeoutMs });
    const conn = raw;
    db = new Kysely<DB>({ dialect: new SqliteDialect({ database: cachingStatements(conn) }) });
    conn.pragma(`busy_timeout = ${options.busyTimeoutMs}`);
    if (file !== MEMORY_PATH) {
      const mode = retryTransient(() => conn.pragma('journal_mode = WAL', { simple: true }), options.busyTimeoutMs);
      if (String(mode).toLowerCase() !== 'wal') {
        throw new VaultOpenError(`${spec.name} ${file}: journal_mode=WAL was refused (got ${String(mode)})`, { path: file, reason: 'wal_refused' });
      }
    }
    conn.pragma('synchronous = NORMAL');
    conn.pragma('foreign_keys = ON');
    const store = sqliteStore(conn, db, file);
    await migrate(spec, store, file, options.busyTimeoutMs);
    privateSideFiles(file);
    return store;
  } catch (error) {
    // kysely closes the connection only if it ever used it: close it ourselves otherwise.
    await db?.destroy().catch(() => undefined);
    if (raw?.open === true) raw.close();
    throw error instanceof TokenTerminatorError ? error : VaultOpenError.wrap(file, error);
  }
}

/**
 * The connection as kysely sees it, with its prepared statements kept (kysely prepares every
 * query it runs; the vault runs a few dozen distinct SQL texts over and over, and preparing was a
 * good part of each call). Kysely runs one query at a time on this connection and never streams
 * here, so a cached statement is never busy when it is reused. Bounded: the oldest are dropped.
 */
function cachingStatements(conn: Database.Database): { close(): void; prepare(sql: string): Database.Statement } {
  const statements = new Map<string, Database.Statement>();
  return {
    close: () => {
      statements.clear();
      conn.close();
    },
    prepare(sql) {
      let stmt = statements.get(sql);
      if (stmt === undefined || stmt.busy) {
        stmt = conn.prepare(sql);
        statements.set(sql, stmt);
        if (statements.size > 512) statements.delete(statements.keys().next().value as string);
      }
      return stmt;
    },
  };
}

function sqliteStore<DB>(raw: Database.Database, db: Kysely<DB>, file: string): SqliteStore<DB> {
  let sideFilesPrivate = false;
  return {
    engine: 'sqlite',
    db,
    raw,
    location: file,
    // One connection, held for the whole transaction (kysely's driver mutex): BEGIN IMMEDIATE takes
    // the file's write lock up front, so a transaction never fails half-way on a lock upgrade.
    write: (fn) =>
      db.connection().execute(async (conn) => {
        await sql`begin immediate`.execute(conn);
        try {
          const result = await fn(conn);
          await sql`commit`.execute(conn);
          if (!sideFilesPrivate) {
            privateSideFiles(file);
            sideFilesPrivate = true;
          }
          return result;
        } catch (error) {
          // SQLite may have rolled back already (SQLITE_FULL, SQLITE_IOERR): only roll back an open transaction.
          if (raw.inTransaction) await sql`rollback`.execute(conn).catch(() => undefined);
          throw error;
        }
      }),
    // The write transaction locks the whole file: no row locks needed.
    lock: (query) => query,
    destroy: () => db.destroy(),
  };
}

async function migrate<DB>(spec: SchemaSpec, store: SqliteStore<DB>, file: string, busyTimeoutMs: number): Promise<void> {
  const raw = store.raw;
  retryTransient(() => raw.exec('BEGIN IMMEDIATE'), busyTimeoutMs);
  try {
    const version = Number(raw.pragma('user_version', { simple: true }));
    if (version > spec.version) {
      throw new VaultSchemaError(
        `${spec.name} ${file} has schema version ${version}, newer than the supported ${spec.version}; ` +
          'upgrade token-terminator or point it at another file',
      );
    }
    const db = store.db as Kysely<unknown>;
    if (version < spec.version) {
      // SQLite's kysely adapter runs migrations without its own transaction, so they join ours.
      const migrator = new Migrator({
        db,
        migrationTableName: spec.migrationTable,
        provider: { getMigrations: () => Promise.resolve({ ...spec.migrations(SQLITE_FLAVOR) }) },
      });
      const result = await migrator.migrateToLatest();
      if (result.error !== undefined) {
        throw new VaultSchemaError(`${spec.name} ${file}: migration failed: ${errorMessage(result.error)}`);
      }
      raw.pragma(`user_version = ${spec.version}`);
    }
    await spec.afterMigrate?.(db, (query) => query);
    raw.exec('COMMIT');
  } catch (error) {
    if (raw.inTransaction) raw.exec('ROLLBACK');
    throw error;
  }
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
