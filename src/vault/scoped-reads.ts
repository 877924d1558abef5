/**
 * Reads by id bound to one tenant's session, for every stage that resolves an id it found in a
 * request (a temporal delta, a reused receipt) or a baseline. The request path holds these and a
 * {@link RequestStore}, which has no read by id, so an unscoped read cannot be written there by
 * accident. An id outside the scope is unknown (ArtifactNotFoundError, `verify` false).
 */
import { REQUEST_METHODS } from './ports.js';
import type { ArtifactStore, IdRead, KnownContent, LeaseStore, SessionStore, StoreScope } from './ports.js';
import type { ArtifactPage } from './types.js';

/** Whose evidence a read may see: a tenant, and one of its sessions (absent: every session of the tenant). */
export interface ReadScope {
  readonly tenant: string;
  readonly sessionId?: string;
}

/** The artifact port's reads by id, each limited to {@link scope}. */
export interface ScopedReads {
  /** The tenant (and session) every read is limited to; frozen. */
  readonly scope: ReadScope;
  /** True when the artifact is in scope and its content hashes to its id (`known`: see {@link ArtifactStore.verify}). */
  verify(artifactId: string, known?: KnownContent): Promise<boolean>;
  /** An exact page; throws ArtifactNotFoundError for an id outside the scope. */
  page(artifactId: string, offset?: number, limit?: number): Promise<ArtifactPage>;
  /** The whole artifact (exact), in one store read; throws what {@link page} throws. */
  read(artifactId: string): Promise<string>;
}

/**
 * The store as the request path sees it: writes, leases, deliveries and session state, and no
 * read by id (those go through {@link ScopedReads}).
 */
export type RequestStore = Omit<ArtifactStore, IdRead> & LeaseStore & SessionStore;

/**
 * The request path's view of a store: every method but the reads by id, each looked up on `store`
 * when it runs (a host's wrapper or fault injection on the vault still applies). A request stage
 * narrows the store it was given with this once, when it is built.
 *
 * @example
 * const store = requestStore(vault);
 * 'page' in store; // false
 */
export function requestStore(store: ArtifactStore & LeaseStore & SessionStore): RequestStore {
  // An optional method the store lacks (putMany) stays absent, so the caller's fallback applies.
  const methods = REQUEST_METHODS.filter((name) => store[name] !== undefined).map((name) => [
    name,
    (...args: unknown[]) => Reflect.apply(store[name]!, store, args) as unknown,
  ]);
  const view = Object.defineProperty(Object.fromEntries(methods), 'workingState', {
    get: () => store.workingState,
    enumerable: true,
  });
  return Object.freeze(view) as RequestStore;
}

/**
 * Bind the reads by id of `store` to `scope`. Each call looks the store's method up when it runs,
 * so a host's wrapper or fault injection on the vault still applies.
 *
 * @example
 * const reads = scopedReads(vault, { tenant: 'k_1a2b', sessionId: 's1' });
 * await reads.verify(otherTenantsId); // false: unknown in this scope
 */
export function scopedReads(store: ArtifactStore, scope: ReadScope): ScopedReads {
  if (scope === null || typeof scope !== 'object' || typeof scope.tenant !== 'string')
    throw new TypeError('scopedReads: scope.tenant must be a string');
  if (scope.sessionId !== undefined && typeof scope.sessionId !== 'string')
    throw new TypeError('scopedReads: scope.sessionId must be a string when given');
  const bound: StoreScope & ReadScope = Object.freeze(
    scope.sessionId === undefined ? { tenant: scope.tenant } : { tenant: scope.tenant, sessionId: scope.sessionId },
  );
  return Object.freeze({
    scope: bound,
    verify: (artifactId: string, known?: KnownContent) => store.verify(artifactId, bound, known),
    page: (artifactId: string, offset?: number, limit?: number): Promise<ArtifactPage> =>
      store.page(artifactId, offset, limit, bound),
    read: (artifactId: string) => store.read(artifactId, bound),
  });
}
