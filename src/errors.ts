/** Errors with a stable `code`. Public entry points throw only for bad configuration. */
export class TokenTerminatorError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** Invalid configuration: names the variable or option and the accepted range. */
export class ConfigError extends TokenTerminatorError {
  constructor(message: string) {
    super('E_CONFIG', message);
  }
}

/** No artifact with this id is in the vault. */
export class ArtifactNotFoundError extends TokenTerminatorError {
  constructor(artifactId: string) {
    super('E_ARTIFACT_NOT_FOUND', `unknown artifact ${artifactId}`);
  }
}

/** An artifact does not fit: longer than the per-artifact limit, or larger than the vault's capacity. */
export class VaultCapacityError extends TokenTerminatorError {
  constructor(message: string) {
    super('E_VAULT_CAPACITY', message);
  }
}

/** An artifact read back after writing did not match what was written, so it must not be relied on. */
export class VaultVerifyError extends TokenTerminatorError {
  constructor(artifactId: string) {
    super('E_VAULT_VERIFY', `read-back verification failed for ${artifactId}`);
  }
}

/** The vault database has a schema this version cannot use, or a migration failed. */
export class VaultSchemaError extends TokenTerminatorError {
  constructor(message: string) {
    super('E_VAULT_SCHEMA', message);
  }
}

/** A token counter could not count (error code `E_COUNTER`). */
export class CounterError extends TokenTerminatorError {
  constructor(message: string, options?: ErrorOptions) {
    super('E_COUNTER', message, options);
  }
}

/**
 * Stable codes of `rtk rewrite` faults (hang, crash, garbage, undocumented exit, unusable binary).
 *
 * @example
 * import { RTK_FAULT_CODES, RtkFaultError } from 'token-terminator';
 * const hung = error instanceof RtkFaultError && error.code === RTK_FAULT_CODES.timeout; // 'E_RTK_TIMEOUT'
 */
export const RTK_FAULT_CODES = Object.freeze({
  timeout: 'E_RTK_TIMEOUT',
  spawn: 'E_RTK_SPAWN',
  signal: 'E_RTK_SIGNAL',
  invalid_output: 'E_RTK_INVALID_OUTPUT',
  exit_code: 'E_RTK_EXIT_CODE',
});

/** `rtk rewrite` failed: the command passes through unchanged (a `failed_open` decision). */
export class RtkFaultError extends TokenTerminatorError {
  constructor(reason: keyof typeof RTK_FAULT_CODES) {
    super(RTK_FAULT_CODES[reason], `rtk rewrite failed (${reason})`);
  }
}
