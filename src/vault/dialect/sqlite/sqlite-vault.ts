/** A vault on a SQLite file: the store, the FTS5 search index, content stored as TEXT, its health. */
import type { VaultConnection } from '../../dialect.js';
import { createHealthMonitor, fileIdentity } from '../../health.js';
import type { VaultHealth } from '../../ports.js';
import { VAULT_SCHEMA, type VaultDatabase } from '../../schema.js';
import { createSqliteSearch } from './sqlite-search.js';
import { MEMORY_PATH, openSqliteStore, type SqliteStoreOptions } from './sqlite-store.js';

export interface SqliteVaultOptions extends SqliteStoreOptions {
  readonly indexInBackground: boolean;
}

export async function openSqliteVault(options: SqliteVaultOptions): Promise<VaultConnection> {
  const store = await openSqliteStore<VaultDatabase>(VAULT_SCHEMA, options);
  const readOnly = store.readOnlyReason !== undefined;
  const search = createSqliteSearch(store, options.indexInBackground && !readOnly);
  const initial: VaultHealth = !readOnly
    ? { state: 'ok' }
    : /^SQLITE_(CORRUPT|NOTADB)/.test(store.readOnlyReason!)
      ? { state: 'corrupt', detail: store.readOnlyReason! }
      : { state: 'read_only', detail: store.readOnlyReason! };
  const health = createHealthMonitor(
    store.location,
    {
      ...(store.location === MEMORY_PATH || readOnly ? {} : { fileState: fileIdentity(store.location) }),
      integrity: () =>
        (store.raw.pragma('quick_check(1)', { simple: true }) ?? 'ok') === 'ok' ? undefined : 'quick_check failed',
    },
    initial,
  );
  return {
    ...store,
    readOnly,
    health,
    encodeContent: (content) => content,
    decodeContent: (value) => (typeof value === 'string' ? value : Buffer.from(value).toString('utf8')),
    label: (value) => value,
    search,
    destroy: async () => {
      search.close();
      await store.destroy();
    },
  };
}
