/**
 * `unavailableVault` stands in for a vault that could not be opened (either dialect): every
 * operation rejects with the open error, so the recovery tool answers it as a clear
 * `{code, message}` and status reports the vault unavailable; closing it is a no-op.
 */
import { VAULT_DATA_METHODS, type Vault } from './ports.js';

export function unavailableVault(path: string, error: Error): Vault {
  const fail = (): Promise<never> => Promise.reject(error);
  const close = async (): Promise<void> => undefined;
  const methods = Object.fromEntries(VAULT_DATA_METHODS.map((name) => [name, fail])) as unknown as Vault;
  return Object.freeze({
    ...methods,
    path,
    engine: 'sqlite',
    readOnly: true,
    health: () => Object.freeze({ state: 'ok' as const }),
    workingState: Object.freeze({ apply: fail, get: fail }),
    close,
    [Symbol.asyncDispose]: close,
  });
}
