/**
 * Opening the Terminator's vault: a vault that cannot be opened, or only read, is not configuration
 * but an internal failure, so by default the Terminator comes up in pass-through mode instead of
 * failing to start (`vaultErrors`).
 */
import type { ReductionActivity } from '../activity.js';
import type { Config } from '../config/types.js';
import { ConfigError, VaultSchemaError } from '../errors.js';
import { counterForModel } from '../measure/index.js';
import { MissingPackageError } from '../optional-package.js';
import type { TokenCounter } from '../measure/types.js';
import { errorLabel } from '../step.js';
import { vaultLocation } from '../vault/configured.js';
import { VaultHealthError, VaultOpenError } from '../vault/errors.js';
import { createVault, vaultOptionsFromConfig } from '../vault/index.js';
import { unavailableVault } from '../vault/open.js';
import type { Vault } from '../vault/types.js';

/** The vault a Terminator runs on, and why it only passes through when it does. */
export interface OpenedVault {
  readonly vault: Vault;
  /** Set when nothing is reduced: the vault could not be opened, or only read. */
  readonly failure: Error | undefined;
  /** The vault is open but read-only (recovery is still served). */
  readonly readOnly: boolean;
  /** The Terminator opened the vault and closes it. */
  readonly owns: boolean;
}

/** The given vault, else the configured one (deferring its maintenance while `activity` has reductions in flight); one that cannot be opened is unavailable (or thrown). */
export async function openVault(
  config: Config,
  given: Vault | undefined,
  vaultErrors: 'passthrough' | 'throw',
  activity: ReductionActivity,
): Promise<OpenedVault> {
  const owns = given === undefined;
  try {
    // The vault it opens waits for this Terminator's reductions before its maintenance.
    const vault = given ?? (await createVault({ ...vaultOptionsFromConfig(config), activity }));
    return { vault, failure: undefined, readOnly: false, owns };
  } catch (error) {
    if (error instanceof ConfigError) throw error;
    const failure =
      error instanceof VaultOpenError || error instanceof VaultSchemaError
        ? error
        : VaultOpenError.wrap(vaultLocation(config), error);
    if (vaultErrors === 'throw') throw failure;
    warn(
      `token-terminator: the vault at ${vaultLocation(config)} could not be opened (${openReason(failure)}${error instanceof MissingPackageError ? `: ${error.installCommand}` : ''}); running in pass-through mode, nothing is reduced`,
    );
    return { vault: unavailableVault(vaultLocation(config), failure), failure, readOnly: false, owns };
  }
}

/** A vault that can only be read (read-only file, damaged file): nothing is reduced, recovery is served. */
export async function checkWritable(opened: OpenedVault, vaultErrors: 'passthrough' | 'throw'): Promise<OpenedVault> {
  const { vault } = opened;
  if (opened.failure !== undefined || !vault.readOnly) return opened;
  const health = vault.health();
  const failure = new VaultHealthError(
    health.state === 'corrupt' ? 'E_VAULT_CORRUPT' : 'E_VAULT_READ_ONLY',
    health.state,
    `the vault at ${vault.path} is open read-only (${health.detail ?? health.state})`,
  );
  if (vaultErrors === 'throw' && opened.owns) {
    await vault.close();
    throw failure;
  }
  return { ...opened, failure, readOnly: true };
}

/** The reason code of a vault-open failure (content-free), for status. */
export function openReason(failure: Error): string {
  return failure instanceof VaultOpenError ? (failure.reason ?? failure.code) : errorLabel(failure);
}

export function defaultCounter(config: Config): TokenCounter {
  return counterForModel(undefined, { tokenizerJson: config.tokenizerJson, encoding: config.tiktokenEncoding });
}

/**
 * One stderr line per Terminator that comes up unable to reduce (each opens its vault once): a host
 * that silently stopped saving tokens is the failure a user cannot see otherwise. Path and reason
 * code only, never content.
 */
function warn(message: string): void {
  try {
    process.stderr.write(`${message}\n`);
  } catch {
    // a closed stderr must not stop the host
  }
}
