/** What the testing kit's property files share: the vault and counter they run against, and which invariants. */
import { afterAll } from 'vitest';
import { createTiktokenCounter, type TokenCounter } from '../../src/measure/index.js';
import type { InvariantName } from '../../src/testing/index.js';
import { createVault } from '../../src/vault/index.js';
import type { Vault } from '../../src/vault/types.js';

/** The invariants every tool-result operator built with `withDeps` is held to. */
export const TOOL_INVARIANTS: readonly InvariantName[] = [
  'unchanged-or-smaller',
  'never-mutates',
  'recovers-exactly',
  'fails-open',
  'releases-on-unsubscribe',
];

/** The tool-result invariants plus valid roles: what every request operator built with `withDeps` is held to. */
export const REQUEST_INVARIANTS: readonly InvariantName[] = [...TOOL_INVARIANTS, 'valid-roles'];

/**
 * An in-memory SQLite vault and the exact o200k counter, both released after the file's tests. Call it
 * at load time (top-level `await`): the kit registers its properties with the vault they run against.
 */
export async function propertyDeps(): Promise<{ readonly vault: Vault; readonly counter: TokenCounter }> {
  const vault = await createVault({ path: ':memory:' });
  const counter = createTiktokenCounter('o200k_base');
  afterAll(async () => {
    counter.dispose?.();
    await vault.close();
  });
  return { vault, counter };
}
