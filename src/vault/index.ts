/** The vault: exact, content-addressed evidence storage (SQLite via kysely + better-sqlite3). */
export type * from './types.js';
export { createVault, type VaultOptions } from './sqlite.js';
export { artifactIdFor, sha256Hex } from './identity.js';
export { VaultArgumentError, VaultContentError, VaultOpenError } from './errors.js';
export { SCHEMA_VERSION } from './schema.js';
export { vaultOptionsFromConfig } from './configured.js';
