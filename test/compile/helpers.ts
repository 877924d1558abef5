/** Test helpers for the request stages: run Steps through an operator, recover artifacts. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { from, lastValueFrom, toArray, type OperatorFunction } from 'rxjs';
import { afterAll } from 'vitest';
import { createTiktokenCounter } from '../../src/measure/index.js';
import type { TokenCounter } from '../../src/measure/types.js';
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

/** The conversation list's key of a request (`input` for the Responses API, else `messages`). */
export const listKey = (r: ProviderRequest): 'messages' | 'input' => (Array.isArray(r['input']) ? 'input' : 'messages');

/** A JSON round trip: what a host that rebuilds its objects (or HTTP) hands over. */
export const clone = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;

/** A temp directory and an exact counter for one test file, removed and released after it. */
export function fileFixture(name: string): { readonly dir: string; readonly counter: TokenCounter } {
  const dir = mkdtempSync(join(tmpdir(), `tt-${name}-`));
  const counter = createTiktokenCounter('o200k_base');
  afterAll(() => {
    counter.dispose?.();
    rmSync(dir, { recursive: true, force: true });
  });
  return { dir, counter };
}

/** The same session with the host reusing its objects: every request is the last one's items, sliced. */
export function reusing(session: readonly ProviderRequest[]): ProviderRequest[] {
  const last = session[session.length - 1]!;
  const key = listKey(last);
  const items = last[key] as unknown[];
  return session.map((r) => ({ ...last, [key]: items.slice(0, (r[key] as unknown[]).length) }));
}

/** An assistant turn reading `<id>.ts` with one read_file call. */
export const readCall = (id: string): Record<string, unknown> => ({
  role: 'assistant',
  content: null,
  tool_calls: [{ id, type: 'function', function: { name: 'read_file', arguments: `{"path":"${id}.ts"}` } }],
});

/** The output of reading `<id>.ts`: `lines` numbered source lines, or a one-line stand-in when 0. */
export const readOutput = (id: string, lines = 0): Record<string, unknown> => ({
  role: 'tool',
  tool_call_id: id,
  content:
    lines === 0
      ? `contents of ${id}.ts`
      : Array.from({ length: lines }, (_, i) => `${id}.ts line ${i}: const v${i} = ${i};`).join('\n'),
});
