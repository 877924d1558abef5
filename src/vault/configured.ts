import type { Config } from '../config/types.js';
import type { VaultOptions } from './sqlite.js';

/** The vault options a Config implies: one mapping for the runtime, the CLI and the replay. */
export function vaultOptionsFromConfig(config: Config): VaultOptions {
  return {
    path: config.dbPath,
    maxArtifactChars: config.maxArtifactChars,
    maxBytes: config.vaultMaxBytes,
    highWaterPct: config.vaultHighWaterPct,
    lowWaterPct: config.vaultLowWaterPct,
    maxPageChars: config.maxPageChars,
    maxSearchResults: config.maxSearchResults,
    busyTimeoutMs: config.busyTimeoutMs,
  };
}
