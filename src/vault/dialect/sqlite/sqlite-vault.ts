/** A vault on a SQLite file: the store, the FTS5 search index, content stored as TEXT. */
import type { VaultConnection } from '../../dialect.js';
import { VAULT_SCHEMA, type VaultDatabase } from '../../schema.js';
import { createSqliteSearch } from './sqlite-search.js';
import { openSqliteStore } from './sqlite-store.js';

export interface SqliteVaultOptions {
  readonly path: string;
  readonly busyTimeoutMs: number;
  readonly indexInBackground: boolean;
}

export async function openSqliteVault(options: SqliteVaultOptions): Promise<VaultConnection> {
  const store = await openSqliteStore<VaultDatabase>(VAULT_SCHEMA, options);
  const search = createSqliteSearch(store, { background: options.indexInBackground, busyTimeoutMs: options.busyTimeoutMs });
  return {
    ...store,
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
