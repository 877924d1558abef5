/** Vault-specific errors (beside src/errors.ts; same base class, stable codes). */
import { TokenTerminatorError } from '../errors.js';
import { MissingPackageError } from '../optional-package.js';

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

export interface VaultOpenErrorOptions extends ErrorOptions {
  /** The vault file (a path is configuration, never content). */
  readonly path?: string;
  /** What failed, as a code: `SQLITE_NOTADB`, `ENOTDIR`, `SQLITE_BUSY`, `closed`, ... */
  readonly reason?: string;
}

/**
 * The database could not be opened as a vault (corrupt file, not a database, a path below a
 * regular file, an unwritable directory, WAL refused, a lock held past the busy timeout), or the
 * vault is closed. Code `E_VAULT_OPEN`; `path` and `reason` say where and what, never content.
 */
export class VaultOpenError extends TokenTerminatorError {
  readonly path: string | undefined;
  readonly reason: string | undefined;

  constructor(message: string, options: VaultOpenErrorOptions = {}) {
    const { path, reason, ...rest } = options;
    super('E_VAULT_OPEN', message, rest);
    this.path = path;
    this.reason = reason;
  }

  /** Wrap a raw failure (SqliteError, fs error) met while opening the vault at `path`. */
  static wrap(path: string, cause: unknown): VaultOpenError {
    const reason = reasonOf(cause);
    // A missing driver's message is ours and says how to fix it (the package and its install command).
    const fix = cause instanceof MissingPackageError ? `: ${cause.message}` : '';
    return new VaultOpenError(`the vault at ${path} could not be opened (${reason})${fix}`, { path, reason, cause });
  }
}

/** The cause's code (SqliteError and fs errors carry one), else its class name; never its message. */
function reasonOf(cause: unknown): string {
  const code = (cause as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && /^[A-Za-z0-9_]{1,64}$/.test(code)) return code;
  return cause instanceof Error ? cause.name : typeof cause;
}

/**
 * The vault refuses to write because of its health: the file it opened was deleted or replaced
 * (code `E_VAULT_GONE`), it is damaged (`E_VAULT_CORRUPT`) or opened read-only (`E_VAULT_READ_ONLY`).
 * Stages fail open; recovery reads are still served where they can be.
 */
export class VaultHealthError extends TokenTerminatorError {
  readonly state: string;
  constructor(code: 'E_VAULT_GONE' | 'E_VAULT_CORRUPT' | 'E_VAULT_READ_ONLY', state: string, message: string) {
    super(code, message);
    this.state = state;
  }
}
