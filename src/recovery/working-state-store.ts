/**
 * The earlier stand-alone working-state store, kept for existing callers: it now opens a vault on
 * the file and hands out its `workingState` port (same tables, same behaviour). New code uses
 * `vault.workingState` of the vault it already has — one connection per process per store.
 * @deprecated use `Vault.workingState`.
 */
import { createVault } from '../vault/create.js';
import type { WorkingStateStore } from '../vault/ports.js';
export { WorkingStateError } from '../vault/working-state.js';

/** Options of {@link createWorkingStateStore}; only `path` is required. */
export interface WorkingStateStoreOptions {
  /** SQLite file (normally the vault's, `config.dbPath`), or ':memory:' (required). */
  readonly path: string;
  /**
   * Most nodes per session, retired ones included.
   *
   * @defaultValue 1000
   */
  readonly maxNodes?: number;
  /**
   * Most edges per session, retired ones included.
   *
   * @defaultValue 2000
   */
  readonly maxEdges?: number;
  /**
   * Most events per session.
   *
   * @defaultValue 100,000
   */
  readonly maxEvents?: number;
  /**
   * Lock wait in ms.
   *
   * @defaultValue 10,000
   */
  readonly busyTimeoutMs?: number;
}

/** A working-state store that owns its database connection. */
export interface ClosableWorkingStateStore extends WorkingStateStore {
  close(): void;
}

/**
 * @deprecated use `Vault.workingState`.
 *
 * @example
 * import { createWorkingStateStore } from 'token-terminator';
 * // Deprecated: prefer `vault.workingState` of a vault from `createVault`.
 * const store = createWorkingStateStore({ path: ':memory:' });
 */
export function createWorkingStateStore(options: WorkingStateStoreOptions): ClosableWorkingStateStore {
  const limits = {
    ...(options.maxNodes === undefined ? {} : { maxNodes: options.maxNodes }),
    ...(options.maxEdges === undefined ? {} : { maxEdges: options.maxEdges }),
    ...(options.maxEvents === undefined ? {} : { maxEvents: options.maxEvents }),
  };
  const vault = createVault({
    path: options.path,
    busyTimeoutMs: options.busyTimeoutMs ?? 10_000,
    workingState: limits,
  });
  vault.catch(() => undefined);
  return {
    apply: async (sessionId, operations) => (await vault).workingState.apply(sessionId, operations),
    get: async (sessionId, opts) => (await vault).workingState.get(sessionId, opts),
    close: () => void vault.then((v) => v.close()).catch(() => undefined),
  };
}
