/** Test helpers for the request stages: run Steps through an operator, recover artifacts. */
import { from, lastValueFrom, toArray, type OperatorFunction } from 'rxjs';
import { createStep, type ProviderRequest, type Step, type StepContext } from '../../src/step.js';
import type { Vault } from '../../src/vault/types.js';

export type RequestOp = OperatorFunction<Step<ProviderRequest>, Step<ProviderRequest>>;

/** Run requests in order through ONE subscription of `op`. */
export async function runAll(
  op: RequestOp,
  requests: readonly (readonly [ProviderRequest, StepContext])[],
): Promise<Step<ProviderRequest>[]> {
  return lastValueFrom(from(requests.map(([r, c]) => createStep(r, c))).pipe(op, toArray()));
}

/** The exact content of an artifact, paged through the vault. */
export async function recover(vault: Vault, id: string): Promise<string> {
  let out = '';
  let offset: number | null = 0;
  while (offset !== null) {
    const page = await vault.page(id, offset, 20_000);
    out += page.content;
    offset = page.nextOffset;
  }
  return out;
}

/** Every string inside a JSON-like value. */
export function allStrings(value: unknown, out: string[] = []): string[] {
  if (typeof value === 'string') out.push(value);
  else if (Array.isArray(value)) for (const v of value) allStrings(v, out);
  else if (typeof value === 'object' && value !== null) for (const v of Object.values(value)) allStrings(v, out);
  return out;
}

/** Every key inside a JSON-like value. */
export function allKeys(value: unknown, out: Set<string> = new Set()): Set<string> {
  if (Array.isArray(value)) for (const v of value) allKeys(v, out);
  else if (typeof value === 'object' && value !== null) {
    for (const [k, v] of Object.entries(value)) {
      out.add(k);
      allKeys(v, out);
    }
  }
  return out;
}
