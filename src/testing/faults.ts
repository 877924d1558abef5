/**
 * Fault injection for the fail-open invariant: a vault whose chosen methods fail, a token counter
 * that always throws, and a spawn that cannot start a process. Every injected error is an
 * {@link InjectedFault} so a report can tell it from a real bug.
 */
import type { TokenCounter } from '../measure/types.js';
import { VAULT_DATA_METHODS, type VaultDataMethod } from '../vault/ports.js';
import type { Vault, WorkingStateStore } from '../vault/types.js';

/** The error every kit fault raises (code `E_INJECTED_FAULT`). */
export class InjectedFault extends Error {
  readonly code = 'E_INJECTED_FAULT';
  constructor(what: string) {
    super(`injected fault: ${what}`);
    this.name = 'InjectedFault';
  }
}

/**
 * Vault methods a fault can be injected into: every data method, the working-state store's two
 * included (`'workingState.apply'`, `'workingState.get'`). Not `health` (in-memory state) nor `close`.
 */
export type VaultMethod = VaultDataMethod | `workingState.${keyof WorkingStateStore & string}`;

// A record, so a method added to the working-state store without a line here fails to compile.
const WORKING_STATE: { readonly [M in keyof WorkingStateStore & string]: true } = { apply: true, get: true };

/** Every vault method {@link faultyVault} can make fail. */
export const VAULT_METHODS: readonly VaultMethod[] = Object.freeze([
  ...VAULT_DATA_METHODS,
  ...Object.keys(WORKING_STATE).map((m) => `workingState.${m}` as VaultMethod),
]);

/** Options of {@link faultyVault}; every field is optional. */
export interface FaultyVaultOptions {
  /** Methods that fail. @defaultValue every method except `close` */
  readonly failOn?: readonly VaultMethod[] | 'all';
  /** `'reject'`: a rejected promise (a failing query); `'throw'`: a synchronous throw. @defaultValue `'reject'` */
  readonly mode?: 'reject' | 'throw';
  /** Calls of a failing method that succeed before it starts failing (e.g. 1: the first put works). @defaultValue 0 */
  readonly after?: number;
}

/** What a faulty vault saw: how many calls each method got and how many faults it raised. */
export interface FaultLog {
  readonly calls: Readonly<Record<string, number>>;
  readonly faults: number;
}

/**
 * Wrap a vault so the chosen methods fail. Other methods (and `close`) reach the real vault.
 *
 * @example
 * const broken = faultyVault(vault, { failOn: ['put'] });
 * const op = compressToolResult({ vault: broken });   // must pass results through unchanged
 */
export function faultyVault(vault: Vault, options: FaultyVaultOptions = {}): Vault & { readonly faultLog: FaultLog } {
  const failing = new Set<string>(
    options.failOn === undefined || options.failOn === 'all' ? VAULT_METHODS : options.failOn,
  );
  const mode = options.mode ?? 'reject';
  const after = options.after ?? 0;
  const calls: Record<string, number> = {};
  const log = { calls, faults: 0 };
  const wrap =
    (name: string, target: object, fn: (...a: unknown[]) => unknown) =>
    (...args: unknown[]): unknown => {
      calls[name] = (calls[name] ?? 0) + 1;
      // A failing `put` fails its batch form too (the request path stores several outputs with `putMany`).
      if ((failing.has(name) || (name === 'putMany' && failing.has('put'))) && calls[name]! > after) {
        log.faults += 1;
        const fault = new InjectedFault(`vault.${name}`);
        if (mode === 'throw') throw fault;
        return Promise.reject(fault);
      }
      return fn.apply(target, args);
    };
  let workingState: readonly [real: WorkingStateStore, wrapped: WorkingStateStore] | undefined;
  return new Proxy(vault, {
    get(target, prop, receiver) {
      if (prop === 'faultLog') return log;
      const value: unknown = Reflect.get(target, prop, receiver);
      if (prop === 'workingState' && value !== null && typeof value === 'object') {
        const store = value as WorkingStateStore;
        if (workingState?.[0] !== store) {
          const wrapped: WorkingStateStore = {
            apply: wrap('workingState.apply', store, store.apply as (...a: unknown[]) => unknown) as never,
            get: wrap('workingState.get', store, store.get as (...a: unknown[]) => unknown) as never,
          };
          workingState = [store, wrapped];
        }
        return workingState[1];
      }
      if (typeof value !== 'function') return value;
      return wrap(String(prop), target, value as (...a: unknown[]) => unknown);
    },
  }) as Vault & { readonly faultLog: FaultLog };
}

/**
 * A counter that claims to be exact and throws on every count (a broken tokenizer).
 *
 * @example
 * const op = compressToolResult({ vault, counter: throwingCounter() }); // must still fail open
 */
export function throwingCounter(name = 'throwing'): TokenCounter {
  return {
    name,
    exact: true,
    count() {
      throw new InjectedFault('counter.count');
    },
  };
}

/**
 * A spawn that never starts a process: throws like `spawn` does for EACCES/ENOENT.
 *
 * @example
 * import { throwingSpawn } from 'token-terminator/testing';
 * const spawn = throwingSpawn();
 * // pass `spawn` where an operator accepts a spawn function: every call throws, and the operator must fail open
 */
export function throwingSpawn(): (...args: unknown[]) => never {
  return () => {
    throw new InjectedFault('spawn');
  };
}
