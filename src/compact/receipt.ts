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
import type { ArtifactStore, KnownContent, LeaseStore, StoreScope } from '../vault/ports.js';
import type { PutInput, PutResult } from '../vault/types.js';
import { storeScope, type StepContext, type ToolResult } from '../step.js';

/** The longest artifact id a put can return (prefix collision): used for pre-write size proofs. */
export const LONGEST_ARTIFACT_ID = `a_${'0'.repeat(64)}`;

/**
 * Put the exact content, then read it back (in the put's scope: the put just gave it access) and
 * compare it with the content. The content is hashed once, here (or by the caller's ledger, as
 * `input.digest`): put stores it under that digest, and the read-back compares the stored row with
 * the content and that digest instead of hashing it again.
 */
export async function vaultExact(vault: ArtifactStore, input: PutInput, scope?: StoreScope): Promise<PutResult> {
  const digest = input.digest ?? sha256Hex(input.content);
  const put = await vault.put({ ...input, digest }, scope);
  if (
    put.sha256 !== digest ||
    !(await vault.verify(put.artifactId, scope, { content: input.content, sha256: digest }))
  ) {
    throw new VaultVerifyError(put.artifactId);
  }
  return put;
}

/**
 * {@link vaultExact} for a tool result: its exact content under the host's tool name (the one the
 * agent knows and may search by), with its arguments, session and call id, in the step's scope.
 * The digest comes from `digests` (the item ledger) when given: a text already hashed is looked up.
 */
export function vaultToolResult(
  vault: ArtifactStore,
  result: ToolResult,
  context: StepContext,
  digests?: Digests,
): Promise<PutResult> {
  return vaultExact(
    vault,
    {
      content: result.content,
      ...(digests === undefined ? {} : { digest: digests.of(result.content) }),
      toolName: result.name,
      args: result.args,
      sessionId: context.sessionId,
      callId: result.callId,
    },
    storeScope(context),
  );
}

/**
 * The content a tool result was just vaulted with, by its id: what {@link pinDelivered} compares
 * the stored row with instead of hashing it again.
 */
export function putContent(put: PutResult, content: string): ReadonlyMap<string, KnownContent> {
  return new Map([[put.artifactId, { content, sha256: put.sha256 }]]);
}

/**
 * Deliver the artifacts a receipt or note about to reach the host names: pinned for the scope's
 * session and read back in one transaction, under the lock retention takes (`known`: contents the
 * caller put, compared instead of hashed; see LeaseStore.deliver). An artifact pruned
 * between the put and this call (by another process's retention) comes back missing, which is a
 * VaultVerifyError here, and the caller fails open with the original.
 */
export async function pinDelivered(
  vault: LeaseStore,
  artifactIds: readonly string[],
  scope: StoreScope,
  known?: ReadonlyMap<string, KnownContent>,
): Promise<void> {
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
