/**
 * Opening a SQLite store file (the vault, or the ledger): private permissions, pragmas, WAL with
 * retries, and the schema's migrations under `BEGIN IMMEDIATE`, the version in `PRAGMA user_version`.
 * One better-sqlite3 connection per store; kysely's SQLite driver serializes every query on it, and
 * {@link SqliteStore.write} holds it for a whole transaction. Every failure on the way is a
 * VaultOpenError (E_VAULT_OPEN, the path and a reason code), except a newer schema (VaultSchemaError).
 */
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, readFileSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { LRUCache } from 'lru-cache';
import { CompiledQuery, Kysely, SqliteDialect, type SqliteDatabase } from 'kysely';
import { TokenTerminatorError } from '../../../errors.js';
import type { VaultOptions } from '../../create.js';
import type { StoreConnection } from '../../dialect.js';
import type { LockBudget } from '../../ports.js';
import { VaultOpenError } from '../../errors.js';
import { createIdleGate, type IdleGate } from '../../idle.js';
import { migrateSchema, type SchemaSpec } from '../../schema.js';
import { SQLITE_FLAVOR } from './sqlite-flavor.js';

export const MEMORY_PATH = ':memory:';

/** SQLITE_BUSY / SQLITE_LOCKED and their extended codes: another process holds a lock for a moment. */
export function isTransientLock(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^SQLITE_(BUSY|LOCKED)/.test(code);
}

/** Set a file to 0600 when it exists (best effort: a file owned by someone else stays as it is). */
function privateFile(path: string): void {
  try {
    if (existsSync(path)) chmodSync(path, 0o600);
  } catch {
    // Not ours to change; SQLite still opens it.
  }
}

/**
 * `mkdir -p`, each directory 0700, throwing the first failure (Node's recursive mkdir never
 * returns where every attempt answers ENOENT, under /proc).
 */
function makeDirectories(dir: string): void {
  const missing: string[] = [];
  for (let d = dir; !existsSync(d) && dirname(d) !== d; d = dirname(d)) missing.unshift(d);
  for (const d of missing) {
    try {
      mkdirSync(d, { mode: 0o700 });
    } catch (error) {
      // Another process opening the same vault made it first: it keeps the mode that one gave it.
      if ((error as NodeJS.ErrnoException).code === 'EEXIST') continue;
      throw error;
    }
    chmodSync(d, 0o700);
  }
}

/** Create the parent directory 0700 (a pre-existing directory keeps its mode) and the file 0600. */
function preparePath(file: string): void {
  makeDirectories(dirname(file));
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

/** What a SQLite store takes of the {@link VaultOptions}; `readOnlyFallback` defaults to false here. */
export type SqliteStoreOptions = Required<Pick<VaultOptions, 'path' | 'busyTimeoutMs'>> &
  Pick<VaultOptions, 'readOnlyFallback' | 'activity'>;

export interface SqliteStore<DB> extends StoreConnection<DB> {
  readonly raw: Database.Database;
  /** Where deferred maintenance waits for the process to be idle (writable stores). */
  readonly idle?: IdleGate;
  /** Set when opened read-only: why (the code of the failure that made it so). */
  readonly readOnlyReason?: string;
  /** Resolves once no WAL checkpoint this store scheduled is pending (run or failed). */
  checkpointed(): Promise<void>;
}

/** WAL frames after which a checkpoint runs: SQLite's own auto-checkpoint default. */
export const CHECKPOINT_FRAMES = 1000;

/**
 * `wal_checkpoint(NOOP)` counts WAL frames from SQLite 3.51 on; an older SQLite would read it as PASSIVE
 * and checkpoint on every commit, so it keeps its own auto-checkpoint.
 */
function canCountWalFrames(conn: Database.Database): boolean {
  const [major = 0, minor = 0] = String(conn.prepare('select sqlite_version()').pluck().get()).split('.').map(Number);
  return major > 3 || (major === 3 && minor >= 51);
}

/** Longest a statement outside a write transaction waits for a lock, synchronously (WAL readers practically never wait). */
const READ_BUSY_MS = 100;
/** Backoff between write-lock attempts: doubling from 2 ms up to 50 ms, never longer than the budget left. */
const FIRST_WAIT_MS = 2;
const MAX_WAIT_MS = 50;
/** Largest file copied into memory to serve a read-only vault whose WAL index cannot be created. */
const READ_ONLY_COPY_MAX_BYTES = 1024 * 1024 * 1024;

/** Failures after which an existing file may still be readable. */
const READ_ONLY_REASONS = /^(EACCES|EPERM|EROFS|SQLITE_READONLY|SQLITE_CANTOPEN|SQLITE_CORRUPT|SQLITE_IOERR)/;

/** BEGIN IMMEDIATE could not take the write lock: retry later (the connection is released meanwhile). */
class WriteLockBusy extends Error {
  constructor(readonly lockError: unknown) {
    super('write lock busy');
  }
}

/** Deferred maintenance waits for this much quiet (no statement, no reduction), at most IDLE_MAX_WAIT_MS (then a turn with no reduction in flight). */
const IDLE_QUIET_MS = 25;
const IDLE_MAX_WAIT_MS = 1000;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Open (creating if needed) and migrate a store file for `spec`. */
export async function openSqliteStore<DB>(spec: SchemaSpec, options: SqliteStoreOptions): Promise<SqliteStore<DB>> {
  const file = options.path === MEMORY_PATH ? MEMORY_PATH : resolve(options.path);
  let raw: Database.Database | undefined;
  let db: Kysely<DB> | undefined;
  try {
    if (file !== MEMORY_PATH) preparePath(file);
    raw = new Database(file, { timeout: Math.min(options.busyTimeoutMs, READ_BUSY_MS) });
    const conn = raw;
    const { activity } = options;
    const idle = createIdleGate({
      quietMs: IDLE_QUIET_MS,
      maxWaitMs: IDLE_MAX_WAIT_MS,
      ...(activity === undefined ? {} : { activity: () => activity }),
    });
    db = new Kysely<DB>({ dialect: new SqliteDialect({ database: cachingStatements(conn, idle) }) });
    conn.pragma(`busy_timeout = ${options.busyTimeoutMs}`);
    if (file !== MEMORY_PATH) {
      // Switching a fresh file to WAL while other processes do the same can report SQLITE_BUSY
      // without consulting the busy handler.
      const mode = await retryLocked(() => conn.pragma('journal_mode = WAL', { simple: true }), options.busyTimeoutMs);
      if (String(mode).toLowerCase() !== 'wal') {
        throw new VaultOpenError(`${spec.name} ${file}: journal_mode=WAL was refused (got ${String(mode)})`, {
          path: file,
          reason: 'wal_refused',
        });
      }
    }
    conn.pragma('synchronous = NORMAL');
    conn.pragma('foreign_keys = ON');
    // SQLite's auto-checkpoint runs inside whichever COMMIT crosses the threshold, with an fsync,
    // on a request's path: this connection checkpoints after its commits instead (see checkpoints()).
    const ownCheckpoints = file !== MEMORY_PATH && canCountWalFrames(conn);
    if (ownCheckpoints) conn.pragma('wal_autocheckpoint = 0');
    const store = sqliteStore(conn, db, file, options.busyTimeoutMs, ownCheckpoints, idle);
    await migrate(spec, store, file, options.busyTimeoutMs);
    conn.pragma(`busy_timeout = ${Math.min(options.busyTimeoutMs, READ_BUSY_MS)}`);
    privateSideFiles(file);
    return store;
  } catch (error) {
    // kysely closes the connection only if it ever used it: close it ourselves otherwise.
    await db?.destroy().catch(() => undefined);
    if (raw?.open === true) raw.close();
    const failure = error instanceof TokenTerminatorError ? error : VaultOpenError.wrap(file, error);
    if (
      options.readOnlyFallback === true &&
      file !== MEMORY_PATH &&
      failure instanceof VaultOpenError &&
      READ_ONLY_REASONS.test(failure.reason ?? '')
    ) {
      const readOnly = openReadOnly<DB>(spec, file, failure.reason!);
      if (readOnly !== undefined) return readOnly;
    }
    throw failure;
  }
}

/** Most prepared statements kept per connection (query shapes are few; IN lists of many lengths are not). */
const STATEMENT_CACHE = 256;

/**
 * The connection for kysely's SqliteDialect, reusing prepared statements by SQL text (kysely prepares
 * every query anew); safe, as the driver runs one query at a time and SQLite re-prepares after DDL.
 */
function cachingStatements(conn: Database.Database, idle?: IdleGate): SqliteDatabase {
  const cache = new LRUCache<string, Database.Statement>({ max: STATEMENT_CACHE });
  return {
    close: () => conn.close(),
    prepare: (text) => {
      idle?.mark();
      let statement = cache.get(text);
      if (statement !== undefined) return statement;
      statement = conn.prepare(text);
      cache.set(text, statement);
      return statement;
    },
  };
}

/**
 * The file opened read-only, or undefined (no such file, another schema version); a WAL file whose
 * `-shm` cannot be created is read from an in-memory copy, its header set to rollback mode.
 */
function openReadOnly<DB>(spec: SchemaSpec, file: string, reason: string): SqliteStore<DB> | undefined {
  let raw: Database.Database | undefined;
  const usable = (conn: Database.Database): boolean =>
    Number(conn.pragma('user_version', { simple: true })) === spec.version;
  try {
    if (!existsSync(file) || statSync(file).size === 0) return undefined;
    try {
      raw = new Database(file, { readonly: true, fileMustExist: true, timeout: READ_BUSY_MS });
      if (!usable(raw)) throw new Error('schema');
    } catch {
      if (raw?.open === true) raw.close();
      raw = undefined;
      if (statSync(file).size > READ_ONLY_COPY_MAX_BYTES) return undefined;
      const image = readFileSync(file);
      if (image.length > 19) {
        image[18] = 1;
        image[19] = 1;
      }
      raw = new Database(image, { readonly: true });
      if (!usable(raw)) {
        raw.close();
        return undefined;
      }
    }
    const conn = raw;
    const db = new Kysely<DB>({ dialect: new SqliteDialect({ database: cachingStatements(conn) }) });
    return {
      engine: 'sqlite',
      db,
      raw: conn,
      location: file,
      readOnlyReason: reason,
      write: () =>
        Promise.reject(
          new VaultOpenError(`the vault at ${file} is open read-only (${reason})`, { path: file, reason: 'read_only' }),
        ),
      lock: (query) => query,
      checkpointed: () => Promise.resolve(),
      destroy: () => db.destroy(),
    };
  } catch {
    if (raw?.open === true) raw.close();
    return undefined;
  }
}

/**
 * Checkpoints after commits, off the caller's await chain: at most one pending, PASSIVE, once the WAL
 * holds {@link CHECKPOINT_FRAMES} frames; a failed one waits for the next commit to schedule it again.
 */
function checkpoints(raw: Database.Database, db: Kysely<unknown>, enabled: boolean, idle: IdleGate) {
  let pending: Promise<void> | undefined;
  let startNow: (() => void) | undefined;
  let closed = false;
  // Under the driver's mutex, so it never lands inside another caller's transaction.
  const run = (onlyPast: number): Promise<void> =>
    db
      .connection()
      .execute(async () => {
        if (!raw.open || raw.inTransaction) return;
        const [wal] = raw.pragma('wal_checkpoint(NOOP)') as { log: number; checkpointed: number }[];
        if (wal !== undefined && wal.log >= onlyPast && wal.checkpointed < wal.log)
          raw.pragma('wal_checkpoint(PASSIVE)');
      })
      .catch(() => undefined);
  return {
    schedule(): void {
      if (!enabled || closed || pending !== undefined) return;
      // Once the process is idle (src/vault/idle.ts).
      pending = new Promise<void>((resolve) => {
        startNow = resolve;
        idle.defer(() => {
          startNow = undefined;
          resolve();
        });
      })
        .then(() => run(CHECKPOINT_FRAMES))
        .finally(() => {
          pending = undefined;
        });
    },
    settled: async (): Promise<void> => {
      while (pending !== undefined) await pending;
    },
    /** Before the connection closes: whatever is left, so other processes find a short WAL. */
    async close(): Promise<void> {
      closed = true;
      startNow?.();
      startNow = undefined;
      await pending;
      if (enabled) await run(1);
    },
  };
}

/** Compiled once: kysely would compile these raw statements again for every transaction. */
const BEGIN = CompiledQuery.raw('begin immediate');
const COMMIT = CompiledQuery.raw('commit');
const ROLLBACK = CompiledQuery.raw('rollback');

function sqliteStore<DB>(
  raw: Database.Database,
  db: Kysely<DB>,
  file: string,
  busyTimeoutMs: number,
  ownCheckpoints: boolean,
  idle: IdleGate,
): SqliteStore<DB> {
  let sideFilesPrivate = false;
  const readBusy = Math.min(busyTimeoutMs, READ_BUSY_MS);
  const checkpointer = checkpoints(raw, db as Kysely<unknown>, ownCheckpoints, idle);
  // The frame of every write transaction, prepared once (better-sqlite3's pragma() prepares anew).
  const busyOff = raw.prepare('PRAGMA busy_timeout = 0');
  const busyRead = raw.prepare(`PRAGMA busy_timeout = ${readBusy}`);
  const attempt = <T>(fn: (trx: Kysely<DB>) => Promise<T>): Promise<T> =>
    db.connection().execute(async (conn) => {
      // Never wait for the write lock synchronously (better-sqlite3 would block the event loop):
      // a busy BEGIN fails at once and the caller retries after a timer.
      busyOff.get();
      try {
        await conn.executeQuery(BEGIN);
      } catch (error) {
        throw isTransientLock(error) ? new WriteLockBusy(error) : error;
      } finally {
        busyRead.get();
      }
      try {
        const result = await fn(conn);
        await conn.executeQuery(COMMIT);
        checkpointer.schedule();
        if (!sideFilesPrivate) {
          privateSideFiles(file);
          sideFilesPrivate = true;
        }
        return result;
      } catch (error) {
        // SQLite may have rolled back already (SQLITE_FULL, SQLITE_IOERR): only roll back an open transaction.
        if (raw.inTransaction) await conn.executeQuery(ROLLBACK).catch(() => undefined);
        throw error;
      }
    });
  return {
    engine: 'sqlite',
    db,
    raw,
    location: file,
    // BEGIN IMMEDIATE takes the write lock up front, so a transaction never fails half-way on a lock
    // upgrade; a busy attempt is repeated on timers within the busy timeout and the given budget.
    write: (fn, budget) =>
      retryOnTimers(
        () => attempt(fn),
        (error) => (error instanceof WriteLockBusy ? error.lockError : undefined),
        busyTimeoutMs,
        budget ?? { remainingMs: busyTimeoutMs },
      ),
    // The write transaction locks the whole file: no row locks needed.
    lock: (query) => query,
    idle,
    checkpointed: checkpointer.settled,
    destroy: async () => {
      await checkpointer.close();
      idle.close();
      await db.destroy();
    },
  };
}

async function migrate<DB>(
  spec: SchemaSpec,
  store: SqliteStore<DB>,
  file: string,
  busyTimeoutMs: number,
): Promise<void> {
  const raw = store.raw;
  // The file's write lock for the migrations, taken on timers as SqliteStore.write does.
  raw.pragma('busy_timeout = 0');
  try {
    await retryLocked(() => raw.exec('BEGIN IMMEDIATE'), busyTimeoutMs);
  } finally {
    raw.pragma(`busy_timeout = ${busyTimeoutMs}`);
  }
  try {
    const version = Number(raw.pragma('user_version', { simple: true }));
    const db = store.db as Kysely<unknown>;
    // SQLite's kysely adapter runs migrations without its own transaction, so they join ours.
    await migrateSchema(spec, SQLITE_FLAVOR, file, version, { db, migrationTableName: spec.migrationTable });
    if (version < spec.version) raw.pragma(`user_version = ${spec.version}`);
    await spec.afterMigrate?.(db, (query) => query);
    raw.exec('COMMIT');
  } catch (error) {
    if (raw.inTransaction) raw.exec('ROLLBACK');
    throw error;
  }
}

/**
 * Runs `attempt` again on timers while `lockErrorOf` names another connection's lock, within `ownMs`
 * and the shared `budget`, then throws that error. Never SQLite's busy handler, which sleeps on the
 * thread while another store of this process may need the event loop to release the lock.
 */
async function retryOnTimers<T>(
  attempt: () => Promise<T>,
  lockErrorOf: (error: unknown) => unknown,
  ownMs: number,
  budget: LockBudget,
): Promise<T> {
  let mine = ownMs;
  for (let wait = FIRST_WAIT_MS; ; wait = Math.min(MAX_WAIT_MS, wait * 2)) {
    try {
      return await attempt();
    } catch (error) {
      const lockError = lockErrorOf(error);
      if (lockError === undefined) throw error;
      const ms = Math.min(wait, budget.remainingMs, mine);
      if (ms <= 0) throw lockError;
      budget.remainingMs -= ms;
      budget.waitedMs = (budget.waitedMs ?? 0) + ms;
      mine -= ms;
      await sleep(ms);
    }
  }
}

/** Run `fn` again on timers while it fails with a transient lock, for at most `budgetMs` (see retryOnTimers). */
function retryLocked<T>(fn: () => T, budgetMs: number): Promise<T> {
  return retryOnTimers(
    async () => fn(),
    (error) => (isTransientLock(error) ? error : undefined),
    budgetMs,
    { remainingMs: budgetMs },
  );
}
