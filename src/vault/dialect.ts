/**
 * What a dialect folder provides to the stores above it (dialect/sqlite, dialect/postgres: parallel
 * files). Everything else — every query of every port — is written once against kysely; a dialect
 * supplies only the connection, the writer lock, row locks, the content codec and the search index.
 */
import type { Kysely } from 'kysely';
import type { LockBudget, StoreEngine, StoreScope, VaultHealth } from './ports.js';
import type { VaultDatabase } from './schema.js';
import type { ArtifactSummary } from './types.js';

/**
 * Row locks a write transaction takes on PostgreSQL, where several hosts write at once (SQLite
 * needs none: its write transaction locks the whole file):
 * - `delete`: retention is about to delete the row (FOR UPDATE);
 * - `claim`: serialize claims and updates of the row without blocking references to it (FOR NO KEY UPDATE);
 * - `counter`: serialize writers of a counter row (FOR UPDATE).
 */
export type LockStrength = 'delete' | 'claim' | 'counter';

/** The subset of kysely's SelectQueryBuilder the lock clauses need. */
export interface Lockable<Q> {
  forUpdate(): Q;
  forNoKeyUpdate(): Q;
  skipLocked(): Q;
}

/** One open store: its kysely instance over one connection (SQLite) or one pool (PostgreSQL). */
export interface StoreConnection<DB> {
  readonly engine: StoreEngine;
  readonly db: Kysely<DB>;
  /** File path, ':memory:', or the URL without its password. */
  readonly location: string;
  /**
   * Run `fn` in a write transaction: on SQLite `BEGIN IMMEDIATE`, retried without blocking the
   * event loop while another process holds the lock; on PostgreSQL a READ COMMITTED transaction
   * whose row locks (see {@link lock}) serialize it against other hosts. Lock waits draw from
   * `budget` (default: one busy timeout for this transaction). Never nest: use `trx` inside.
   */
  write<T>(fn: (trx: Kysely<DB>) => Promise<T>, budget?: LockBudget): Promise<T>;
  /** Add the dialect's lock clause to a select run inside {@link write}. */
  lock<Q extends Lockable<Q>>(query: Q, strength: LockStrength, skipLocked?: boolean): Q;
  destroy(): Promise<void>;
}

/** The dialect's search index over artifact content (FTS5 trigram on SQLite, pg_trgm on PostgreSQL). */
export interface SearchIndex {
  /** A new artifact row, inside the put transaction. */
  added(trx: Kysely<VaultDatabase>, seq: number, content: string): Promise<void>;
  /** Rows retention is about to delete, inside its transaction. */
  removing(trx: Kysely<VaultDatabase>, seqs: readonly number[]): Promise<void>;
  /**
   * Artifacts whose content or a tool name contains `needle` (already trimmed and case-folded),
   * newest first, visible to `bounds.scope`; stops at `bounds.deadline` with `partial: true`.
   */
  search(
    needle: string,
    limit: number,
    bounds: SearchBounds,
  ): Promise<{ readonly rows: readonly ArtifactSummary[]; readonly partial: boolean }>;
  /** Called after a put that created an artifact (SQLite indexes in the background). */
  afterPut(): void;
  close(): void;
}

/** Where a search may look and until when. */
export interface SearchBounds {
  readonly scope: StoreScope | undefined;
  /** ms on `clock` after which the search returns what it has (partial). */
  readonly deadline: number;
  readonly clock: () => number;
}

/** What a connection knows about the health of its store (see {@link VaultHealth}). */
export interface HealthMonitor {
  current(): VaultHealth;
  /** Before a write: throws VaultHealthError when the store must not be written (gone, corrupt, read-only). */
  assertWritable(): void;
  /** After any failure: a corruption code runs the integrity check once and records its finding. */
  observe(error: unknown): void;
}

/** A vault's connection: the store plus the content codec and the search index. */
export interface VaultConnection extends StoreConnection<VaultDatabase> {
  /** Opened for reading only (a read-only or damaged file): every write refuses. */
  readonly readOnly: boolean;
  readonly health: HealthMonitor;
  /** The content column's value for `content`, and back. */
  encodeContent(content: string): string | Uint8Array;
  decodeContent(value: string | Uint8Array): string;
  /** A label column's value (PostgreSQL text cannot hold NUL: it becomes U+FFFD there). */
  label(value: string): string;
  readonly search: SearchIndex;
}
