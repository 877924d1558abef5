/**
 * `createVault(options)`: open the vault on the dialect its options name — a SQLite file (`path`,
 * the embedded default) or a PostgreSQL database (`url`) — and compose the ports over it. Nothing
 * above this function knows which dialect it got.
 */
import type { ConnectionOptions as TlsOptions } from 'node:tls';
import { ConfigError } from '../errors.js';
import { createArtifactStore } from './artifacts.js';
import type { StoreContext } from './context.js';
import type { VaultConnection } from './dialect.js';
import { openPostgresVault } from './dialect/postgres/postgres-vault.js';
import type { ActivityReading } from '../activity.js';
import { openSqliteVault } from './dialect/sqlite/sqlite-vault.js';
import { VaultOpenError } from './errors.js';
import { createLeaseStore } from './leases.js';
import { createMetricsStore } from './metrics.js';
import { createCountStore } from './token-counts.js';
import { VAULT_DATA_METHODS, type Vault, type VaultDataMethod } from './ports.js';
import { watermarks } from './retention.js';
import { createSessionStore } from './session-state.js';
import type { WorkingStateLimits } from './working-state.js';

/** Options for {@link createVault}. Exactly one of `path` and `url`; every other field has a default. */
export interface VaultOptions {
  /** SQLite file (its directory is created 0700, the file 0600), or `':memory:'`. */
  readonly path?: string;
  /** PostgreSQL connection string (`postgres://user:pass@host:5432/db?sslmode=verify-full&sslrootcert=...`). */
  readonly url?: string;
  /** Largest artifact in code points; larger content is refused. @defaultValue 2,000,000 */
  readonly maxArtifactChars?: number;
  /** Capacity in UTF-8 bytes of artifact content (the search index comes on top). @defaultValue 512 MiB */
  readonly maxBytes?: number;
  /** Inserting past this % of capacity prunes unprotected artifacts. @defaultValue 90 */
  readonly highWaterPct?: number;
  /** Pruning stops at this % (clamped to highWaterPct − 1). @defaultValue 80 */
  readonly lowWaterPct?: number;
  /** Page ceiling for `page` and `peek` in code points. @defaultValue 20,000 */
  readonly maxPageChars?: number;
  /** Most results `search` returns. @defaultValue 50 */
  readonly maxSearchResults?: number;
  /** How long a write waits for another process's (or host's) lock, in ms. @defaultValue 10,000 */
  readonly busyTimeoutMs?: number;
  /** PostgreSQL: connections in this process's pool. @defaultValue 10 */
  readonly poolSize?: number;
  /** PostgreSQL: a statement running longer is cancelled (the stage fails open), in ms. @defaultValue 30,000 */
  readonly statementTimeoutMs?: number;
  /**
   * PostgreSQL: TLS options passed to `pg` as they are (beside any `sslmode` in the URL).
   *
   * @defaultValue from the URL
   */
  readonly ssl?: boolean | TlsOptions;
  /** Wall clock in ms for created/observed times (retention order). @defaultValue `Date.now` */
  readonly clock?: () => number;
  /**
   * SQLite: index new artifacts for search in small batches while the process is idle (search always
   * finishes the queue first, so results are complete either way).
   *
   * @defaultValue true
   */
  readonly indexInBackground?: boolean;
  /**
   * SQLite: the reductions whose quiet deferred maintenance (background indexing, WAL checkpoints)
   * waits for; `createTerminator` passes its own (a `ReductionActivity`, src/activity.ts).
   *
   * @defaultValue none: maintenance waits for the store's own quiet only
   */
  readonly activity?: ActivityReading;
  /** Caps of the working-state graph per session. @defaultValue 1000 nodes, 2000 edges, 100,000 events */
  readonly workingState?: WorkingStateLimits;
  /**
   * A session not seen for this long (ms) — no delivery, lease or rendering — may have its pins,
   * leases and renderings released by retention when it needs room (a closed session at once).
   *
   * @defaultValue 21,600,000 (6 h)
   */
  readonly sessionTtlMs?: number;
  /** A search returns what it found after this long (ms), with `partial: true`. @defaultValue 2,000 */
  readonly searchDeadlineMs?: number;
  /**
   * SQLite: when the file exists but cannot be opened for writing (read-only file, directory or
   * mount) or is damaged, open it read-only (recovery served, every write refused) instead of
   * failing.
   *
   * @defaultValue true
   */
  readonly readOnlyFallback?: boolean;
}

/** Every numeric option: [default, least, greatest]. */
const NUMERIC = {
  maxArtifactChars: [2_000_000, 1, Number.MAX_SAFE_INTEGER],
  maxBytes: [512 * 1024 * 1024, 1, Number.MAX_SAFE_INTEGER],
  highWaterPct: [90, 2, 100],
  lowWaterPct: [80, 0, 99],
  maxPageChars: [20_000, 1, 10_000_000],
  maxSearchResults: [50, 1, 500],
  busyTimeoutMs: [10_000, 0, 3_600_000],
  poolSize: [10, 1, 1000],
  statementTimeoutMs: [30_000, 0, 3_600_000],
  sessionTtlMs: [6 * 3600 * 1000, 0, Number.MAX_SAFE_INTEGER],
  searchDeadlineMs: [2_000, 1, 3_600_000],
} as const satisfies Record<string, readonly [number, number, number]>;

/** Every numeric option, defaulted and range-checked. */
export type ResolvedOptions = { -readonly [K in keyof typeof NUMERIC]: number };

/**
 * postgres:// or postgresql://
 *
 * @example
 * isPostgresUrl('postgres://localhost/tt'); // true
 */
export function isPostgresUrl(value: string): boolean {
  return /^postgres(ql)?:\/\//i.test(value);
}

function resolveOptions(options: VaultOptions): ResolvedOptions {
  if (options === null || typeof options !== 'object') throw new ConfigError('createVault: options must be an object');
  const { path, url } = options;
  if (url !== undefined) {
    if (typeof url !== 'string' || !isPostgresUrl(url))
      throw new ConfigError('createVault: `url` must be a postgres:// or postgresql:// connection string');
    if (path !== undefined) throw new ConfigError('createVault: give `path` (SQLite) or `url` (PostgreSQL), not both');
  } else if (typeof path !== 'string' || path === '') {
    throw new ConfigError(
      'createVault: `path` must be a non-empty string (a file path or ":memory:"), or `url` a postgres:// connection string',
    );
  }
  const out = {} as ResolvedOptions;
  for (const key of Object.keys(NUMERIC) as (keyof ResolvedOptions)[]) {
    const [fallback, min, max] = NUMERIC[key];
    const value = options[key];
    if (value !== undefined && (!Number.isInteger(value) || value < min || value > max)) {
      throw new ConfigError(`createVault: \`${key}\` must be an integer in ${min}…${max} (got ${String(value)})`);
    }
    out[key] = value ?? fallback;
  }
  if (options.clock !== undefined && typeof options.clock !== 'function')
    throw new ConfigError('createVault: `clock` must be a function returning ms');
  for (const key of ['indexInBackground', 'readOnlyFallback'] as const) {
    if (options[key] !== undefined && typeof options[key] !== 'boolean')
      throw new ConfigError(`createVault: \`${key}\` must be a boolean`);
  }
  if (options.ssl === null || !['undefined', 'boolean', 'object'].includes(typeof options.ssl))
    throw new ConfigError('createVault: `ssl` must be a boolean or a TLS options object');
  return out;
}

/**
 * Open (or create) a vault.
 *
 * @example
 * ```ts
 * await using vault = await createVault({ path: '/tmp/tt/vault.sqlite3' });   // or { url: 'postgres://…' }
 * const { artifactId } = await vault.put({ content: 'evidence αβγ\n', toolName: 'terminal' });
 * (await vault.page(artifactId)).content; // 'evidence αβγ\n'
 * ```
 * @throws ConfigError for bad options, VaultSchemaError for a store of a newer schema, VaultOpenError when it cannot be opened.
 */
export async function createVault(options: VaultOptions): Promise<Vault> {
  const opts = resolveOptions(options);
  const clock = options.clock ?? Date.now;
  const conn: VaultConnection =
    options.url !== undefined
      ? await openPostgresVault({
          url: options.url,
          busyTimeoutMs: opts.busyTimeoutMs,
          poolSize: opts.poolSize,
          statementTimeoutMs: opts.statementTimeoutMs,
          ...(options.ssl === undefined ? {} : { ssl: options.ssl }),
        })
      : await openSqliteVault({
          path: options.path as string,
          busyTimeoutMs: opts.busyTimeoutMs,
          indexInBackground: options.indexInBackground !== false,
          readOnlyFallback: options.readOnlyFallback !== false,
          ...(options.activity === undefined ? {} : { activity: options.activity }),
        });
  return composeVault(conn, opts, clock, options.workingState ?? {});
}

function composeVault(
  raw: VaultConnection,
  opts: ResolvedOptions,
  clock: () => number,
  workingState: WorkingStateLimits,
): Vault {
  let closed = false;
  // Every write first asks the health monitor (a deleted, replaced, damaged or read-only store refuses).
  const conn: VaultConnection = {
    ...raw,
    write: async (fn, budget) => {
      raw.health.assertWritable();
      return raw.write(fn, budget);
    },
  };
  const ctx: StoreContext = {
    conn,
    limits: Object.freeze({ ...opts }),
    marks: watermarks(opts.maxBytes, opts.highWaterPct, opts.lowWaterPct),
    clock,
    nowIso: () => new Date(clock()).toISOString(),
    room: { fullUntil: 0 },
  };
  const artifacts = createArtifactStore(ctx);
  const leases = createLeaseStore(ctx);
  const session = createSessionStore(ctx, workingState);
  const metrics = createMetricsStore(ctx);
  const counts = createCountStore(ctx);
  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    artifacts.clear();
    await conn.destroy();
  };
  const observe = <F extends (...args: never[]) => Promise<unknown>>(fn: F): F =>
    (async (...args: Parameters<F>) => {
      if (closed)
        throw new VaultOpenError(`vault ${conn.location} is closed`, { path: conn.location, reason: 'closed' });
      try {
        return await fn(...args);
      } catch (error) {
        raw.health.observe(error);
        throw error;
      }
    }) as F;
  // Every data method refuses once the vault is closed, and its failures reach the health monitor
  // (a corruption code runs the integrity check), the working-state store's included. Not frozen:
  // tests and hosts wrap or replace single methods (fault injection, instrumentation).
  const ports: Pick<Vault, VaultDataMethod> = { ...artifacts, ...leases, ...session, ...metrics, ...counts };
  const vault = Object.fromEntries(
    VAULT_DATA_METHODS.map((name) => [name, observe(ports[name] as never)]),
  ) as unknown as Vault;
  return Object.assign(vault, {
    path: conn.location,
    engine: conn.engine,
    readOnly: raw.readOnly,
    health: () => raw.health.current(),
    workingState: {
      apply: observe(session.workingState.apply),
      get: observe(session.workingState.get),
    },
    close,
    [Symbol.asyncDispose]: close,
  });
}
