/** A vault in a PostgreSQL database: the store, the pg_trgm search index, content stored as bytea. */
import type { VaultConnection } from '../../dialect.js';
import { createHealthMonitor } from '../../health.js';
import { VAULT_SCHEMA, type VaultDatabase } from '../../schema.js';
import { createPostgresSearch } from './postgres-search.js';
import { openPostgresStore, type PostgresStoreOptions } from './postgres-store.js';
import { decodeContent, encodeContent, pgText } from './postgres-text.js';

export async function openPostgresVault(options: PostgresStoreOptions): Promise<VaultConnection> {
  const store = await openPostgresStore<VaultDatabase>(VAULT_SCHEMA, options);
  return {
    ...store,
    readOnly: false,
    // The server owns its files: nothing to probe, so the state stays `ok`.
    health: createHealthMonitor(store.location, {}),
    encodeContent,
    decodeContent,
    label: pgText,
    search: createPostgresSearch(store),
  };
}
