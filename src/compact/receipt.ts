/**
 * The receipt steps every tool-result reduction shares (the size check is `strictlySmaller` in
 * `src/accept.ts`): the exact original vaulted and read back before any replacement, the
 * artifacts a delivered receipt names pinned (retention never prunes them), and a full read for
 * recovery and for temporal baselines.
 */
import type { Digests } from '../ledger/digests.js';
import type { TokenCounter } from '../measure/types.js';
import { VaultVerifyError } from '../errors.js';
import { sha256Hex } from '../vault/index.js';
import type { ArtifactStore, LeaseStore, StoreScope } from '../vault/ports.js';
import type { PutResult } from '../vault/types.js';
import { storeScope, type StepContext, type ToolResult } from '../step.js';

/** The longest artifact id a put can return (prefix collision): used for pre-write size proofs. */
export const LONGEST_ARTIFACT_ID = `a_${'0'.repeat(64)}`;

/**
 * Vault a tool result's exact content under the host's tool name (the one the agent knows and may
 * search by), with its arguments, session and call id, in the step's scope; then read it back and
 * compare. The content is hashed once, here or by `digests` (the item ledger): put stores it under
 * that digest, and the read-back compares the stored row with the content and digest.
 */
export async function vaultToolResult(
  vault: ArtifactStore,
  result: ToolResult,
  context: StepContext,
  digests?: Digests,
): Promise<PutResult> {
  const { content, name: toolName, args, callId } = result;
  const digest = digests?.of(content) ?? sha256Hex(content);
  const scope = storeScope(context);
  const put = await vault.put({ content, digest, toolName, args, sessionId: context.sessionId, callId }, scope);
  if (put.sha256 !== digest || !(await vault.verify(put.artifactId, scope, { content, sha256: digest })))
    throw new VaultVerifyError(put.artifactId);
  return put;
}

/**
 * Deliver the artifacts a receipt or note about to reach the host names: pinned for the scope's
 * session and read back in one transaction, under the lock retention takes (`put`: the content the
 * caller just vaulted, compared instead of hashed; see LeaseStore.deliver). An artifact pruned
 * between the put and this call (by another process's retention) comes back missing, which is a
 * VaultVerifyError here, and the caller fails open with the original.
 */
export async function pinDelivered(
  vault: LeaseStore,
  artifactIds: readonly string[],
  scope: StoreScope,
  put: PutResult,
  content: string,
): Promise<void> {
  const known = new Map([[put.artifactId, { content, sha256: put.sha256 }]]);
  const { missing } = await vault.deliver(artifactIds, scope, known);
  if (missing.length > 0) throw new VaultVerifyError(missing[0]!);
}

/** A counter that can be told a count it would otherwise compute (a count made in slices). */
export interface MemoCounter extends TokenCounter {
  prime(text: string, tokens: number): void;
  /** True when the count of `text` is remembered (counting it again costs nothing). */
  knows(text: string): boolean;
}

/** A counter that remembers the last few texts it counted (one reduction counts the raw text up to three times). */
export function memoCounter(counter: TokenCounter | undefined): MemoCounter | undefined {
  if (counter === undefined) return undefined;
  const seen = new Map<string, number>();
  const prime = (text: string, tokens: number): number => {
    if (seen.size >= 4) seen.delete(seen.keys().next().value!);
    seen.set(text, tokens);
    return tokens;
  };
  return {
    name: counter.name,
    exact: counter.exact,
    prime,
    knows: (text) => seen.has(text),
    count: (text) => seen.get(text) ?? prime(text, counter.count(text)),
  };
}
