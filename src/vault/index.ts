/** The vault: exact, content-addressed evidence storage behind small ports (SQLite file or PostgreSQL via kysely). */
export type * from './types.js';
export { createVault, isPostgresUrl, type VaultOptions } from './create.js';
export { artifactIdFor, sha256Hex } from './identity.js';
export { VaultArgumentError, VaultContentError, VaultOpenError } from './errors.js';
export { SCHEMA_VERSION } from './schema.js';
export { WorkingStateError, type WorkingStateLimits } from './working-state.js';
export { vaultOptionsFromConfig } from './configured.js';
export { requestStore, scopedReads, type ReadScope, type RequestStore, type ScopedReads } from './scoped-reads.js';
export type { IdRead } from './ports.js';
