/**
 * Evidence leases, remembered per session: which (artifact, exposure key) pairs may carry the
 * artifact inline. The vault's lease ledger is the authority (shared by processes); this memo
 * only saves repeated queries, so a request costs vault calls for new decisions only.
 */
import type { LeaseStore } from '../vault/ports.js';

export interface LeaseBook {
  /** Preflight: may `key` carry the artifact inline? (read only) */
  available(artifactId: string, key: string): Promise<boolean>;
  /** Authoritative claim after the candidate was accepted; false when a concurrent claimer won. */
  claim(artifactId: string, key: string): Promise<boolean>;
  /** Record an exposure actually delivered inline (a later gate kept the original). */
  delivered(artifactId: string, key: string): Promise<void>;
}

export function createLeaseBook(vault: LeaseStore, sessionId: string, limit: number): LeaseBook {
  const granted = new Map<string, Set<string>>();
  const exhausted = new Set<string>();
  const grant = (id: string, key: string): void => {
    let keys = granted.get(id);
    if (keys === undefined) granted.set(id, (keys = new Set()));
    keys.add(key);
  };
  return {
    async available(id, key) {
      if (granted.get(id)?.has(key) === true) return true;
      if (exhausted.has(id)) return false;
      const ok = await vault.exposureAvailable(sessionId, id, key, limit);
      if (!ok) exhausted.add(id);
      return ok;
    },
    async claim(id, key) {
      if (granted.get(id)?.has(key) === true) return true;
      const ok = await vault.claimExposure(sessionId, id, key, limit);
      if (ok) grant(id, key);
      else exhausted.add(id);
      return ok;
    },
    async delivered(id, key) {
      await vault.recordExposure(sessionId, id, key, true);
      grant(id, key);
    },
  };
}
