/**
 * Vault-specific errors (additions beside src/errors.ts; same base class, stable codes).
 * They live here so the vault can own them without editing the shared errors module.
 */
import { TokenTerminatorError } from '../errors.js';

/** Content that cannot be stored exactly (a lone surrogate has no UTF-8 form). */
export class VaultContentError extends TokenTerminatorError {
  constructor(message: string) {
    super('E_VAULT_CONTENT', message);
  }
}

/** A bad argument to a vault method (negative offset, empty query, ...). */
export class VaultArgumentError extends TokenTerminatorError {
  constructor(message: string) {
    super('E_VAULT_ARGUMENT', message);
  }
}

/** The database could not be opened as a vault (e.g. WAL refused), or the vault is closed. */
export class VaultOpenError extends TokenTerminatorError {
  constructor(message: string, options?: ErrorOptions) {
    super('E_VAULT_OPEN', message, options);
  }
}
