/**
 * Opening a vault file: private permissions, pragmas, WAL negotiation with retries, schema migration.
 * Every failure on the way is a VaultOpenError (code E_VAULT_OPEN, the path and a reason code),
 * except a newer schema (VaultSchemaError); `unavailableVault` stands in for a vault that failed.
 */
import { chmodSync, closeSync, existsSync, mkdirSync, openSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { Kysely, Migrator, SqliteDialect } from 'kysely';
import { TokenTerminatorError, VaultSchemaError } from '../errors.js';
import { VaultOpenError } from './errors.js';
import { META, SCHEMA_VERSION, migrationProvider, type VaultDatabase } from './schema.js';
import type { Vault } from './types.js';

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

/**
 * Open (creating if needed) and migrate. Throws VaultSchemaError for a newer schema and
 * VaultOpenError for anything else (raw SqliteError / fs errors are wrapped, their code kept as
 * `reason`), so callers can tell "the vault is unusable" from a bug.
 */
export async function openVaultDatabase(path: string, busyTimeoutMs: number): Promise<OpenedDatabase> {
  const file = path === MEMORY_PATH ? MEMORY_PATH : resolve(path);
  let raw: Database.Database | undefined;
  let db: Kysely<VaultDatabase> | undefined;
  try {
    if (file !== MEMORY_PATH) preparePath(file);
    raw = new Database(file, { timeout: busyTimeoutMs });
    const conn = raw;
    db = new Kysely<VaultDatabase>({ dialect: new SqliteDialect({ database: conn }) });
    conn.pragma(`busy_timeout = ${busyTimeoutMs}`);
    if (file !== MEMORY_PATH) {
      const mode = retryTransient(() => conn.pragma('journal_mode = WAL', { simple: true }), busyTimeoutMs);
      if (String(mode).toLowerCase() !== 'wal') {
        throw new VaultOpenError(`vault ${file}: journal_mode=WAL was refused (got ${String(mode)})`, { path: file, reason: 'wal_refused' });
      }
    }
    conn.pragma('synchronous = NORMAL');
    conn.pragma('foreign_keys = ON');
    await migrate(conn, db, file, busyTimeoutMs);
    privateSideFiles(file);
    return { raw: conn, db, path: file };
  } catch (error) {
    // kysely closes the connection only if it ever used it: close it ourselves otherwise.
    await db?.destroy().catch(() => undefined);
    if (raw?.open === true) raw.close();
    throw error instanceof TokenTerminatorError ? error : VaultOpenError.wrap(file, error);
  }
}

/**
 * A stand-in for a vault that could not be opened: every operation rejects with `error` (so the
 * recovery tool answers it as a clear `{code, message}` and status reports the vault unavailable),
 * and closing it is a no-op.
 */
export function unavailableVault(path: string, error: Error): Vault {
  const fail = async (): Promise<never> => {
    throw error;
  };
  const close = async (): Promise<void> => undefined;
  return Object.freeze({
    path,
    put: fail,
    verify: fail,
    summary: fail,
    page: fail,
    peek: fail,
    find: fail,
    search: fail,
    exposureAvailable: fail,
    claimExposure: fail,
    recordExposure: fail,
    pin: fail,
    getBaseline: fail,
    setBaseline: fail,
    getRendering: fail,
    setRendering: fail,
    recordRequestMetric: fail,
    usage: fail,
    close,
    [Symbol.asyncDispose]: close,
  });
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
