/**
 * Opening a vault file: private permissions, pragmas, WAL negotiation with retries, schema migration.
 */
import { chmodSync, closeSync, existsSync, mkdirSync, openSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { Kysely, Migrator, SqliteDialect } from 'kysely';
import { VaultSchemaError } from '../errors.js';
import { VaultOpenError } from './errors.js';
import { META, SCHEMA_VERSION, migrationProvider, type VaultDatabase } from './schema.js';

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

export interface OpenedDatabase {
  readonly raw: Database.Database;
  readonly db: Kysely<VaultDatabase>;
  readonly path: string;
}

/** Open (creating if needed) and migrate. Throws VaultSchemaError for a newer schema. */
export async function openVaultDatabase(path: string, busyTimeoutMs: number): Promise<OpenedDatabase> {
  const file = path === MEMORY_PATH ? MEMORY_PATH : resolve(path);
  if (file !== MEMORY_PATH) preparePath(file);
  const raw = new Database(file, { timeout: busyTimeoutMs });
  const db = new Kysely<VaultDatabase>({ dialect: new SqliteDialect({ database: raw }) });
  try {
    raw.pragma(`busy_timeout = ${busyTimeoutMs}`);
    if (file !== MEMORY_PATH) {
      const mode = retryTransient(() => raw.pragma('journal_mode = WAL', { simple: true }), busyTimeoutMs);
      if (String(mode).toLowerCase() !== 'wal') {
        throw new VaultOpenError(`vault ${file}: journal_mode=WAL was refused (got ${String(mode)})`);
      }
    }
    raw.pragma('synchronous = NORMAL');
    raw.pragma('foreign_keys = ON');
    await migrate(raw, db, file, busyTimeoutMs);
    privateSideFiles(file);
    return { raw, db, path: file };
  } catch (error) {
    await db.destroy();
    throw error;
  }
}

async function migrate(raw: Database.Database, db: Kysely<VaultDatabase>, file: string, busyTimeoutMs: number) {
  retryTransient(() => raw.exec('BEGIN IMMEDIATE'), busyTimeoutMs);
  try {
    const version = Number(raw.pragma('user_version', { simple: true }));
    if (version > SCHEMA_VERSION) {
      throw new VaultSchemaError(
        `vault ${file} has schema version ${version}, newer than the supported ${SCHEMA_VERSION}; ` +
          'upgrade token-terminator or point it at another vault file',
      );
    }
    if (version < SCHEMA_VERSION) {
      // SQLite's kysely adapter runs migrations without its own transaction, so they join ours.
      const result = await new Migrator({ db, provider: migrationProvider }).migrateToLatest();
      if (result.error !== undefined) {
        throw new VaultSchemaError(`vault ${file}: migration failed: ${errorMessage(result.error)}`);
      }
    }
    // Recount once per open so the O(1) counters can never drift from the rows.
    const totals = raw.prepare('SELECT COUNT(*) AS n, COALESCE(SUM(byte_count), 0) AS bytes FROM artifacts').get() as {
      n: number;
      bytes: number;
    };
    const upsert = raw.prepare(
      'INSERT INTO vault_meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value',
    );
    upsert.run(META.bytes, totals.bytes);
    upsert.run(META.count, totals.n);
    const keep = raw.prepare('INSERT OR IGNORE INTO vault_meta (key, value) VALUES (?, 0)');
    keep.run(META.prunedArtifacts);
    keep.run(META.prunedBytes);
    raw.exec('COMMIT');
  } catch (error) {
    if (raw.inTransaction) raw.exec('ROLLBACK');
    throw error;
  }
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
