import type { Config } from '../config/types.js';
import type { VaultOptions } from './create.js';

/**
 * The vault options a Config implies: one mapping for the runtime, the CLI and the replay.
 * TOKEN_TERMINATOR_DB_URL (PostgreSQL) wins over TOKEN_TERMINATOR_DB_PATH (SQLite).
 *
 * @example
 * import { createVault, loadConfig } from 'token-terminator';
 * await using vault = await createVault(vaultOptionsFromConfig(loadConfig()));
 */
export function vaultOptionsFromConfig(config: Config): VaultOptions {
  return {
    ...(config.dbUrl !== ''
      ? { url: config.dbUrl, poolSize: config.dbPoolSize, statementTimeoutMs: config.dbStatementTimeoutMs }
      : { path: config.dbPath }),
    maxArtifactChars: config.maxArtifactChars,
    maxBytes: config.vaultMaxBytes,
    highWaterPct: config.vaultHighWaterPct,
    lowWaterPct: config.vaultLowWaterPct,
    maxPageChars: config.maxPageChars,
    maxSearchResults: config.maxSearchResults,
    busyTimeoutMs: config.busyTimeoutMs,
    sessionTtlMs: config.sessionTtlSeconds * 1000,
    searchDeadlineMs: config.searchDeadlineMs,
  };
}

/** Where the configured vault is, for messages and status (the URL without its password). */
export function vaultLocation(config: Config): string {
  return config.dbUrl === '' ? config.dbPath : redactUrl(config.dbUrl);
}

/** The URL without its password, for status and messages. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password !== '') u.password = '***';
    return u.toString();
  } catch {
    return 'postgres://(unparseable url)';
  }
}
