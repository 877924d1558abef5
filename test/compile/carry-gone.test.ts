/**
 * A bounded view's receipt whose artifact a delivery found gone: the slot stays inline in that
 * request, and the next request stores the content again and shows the view. Both the item's
 * memoized evidence (knownEvidence) and the output facts carried forward for a request that
 * extends the previous one (src/compile/duplicates.ts) used to keep naming the gone artifact, so
 * the output stayed inline for the rest of the conversation.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { collapseDuplicates } from '../../operators/collapse-duplicates.js';
import type { ProviderRequest } from '../../src/step.js';
import { createVault } from '../../src/vault/index.js';
import type { StoreScope, Vault } from '../../src/vault/types.js';
import { runAll } from './helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'tt-carry-gone-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const OUTPUT = Array.from({ length: 80 }, (_, i) => `line ${i} of the build log`).join('\n');

/**
 * The vault as retention leaves it when it releases the session's pins and prunes what the first
 * delivery pinned: those artifacts are missing on every later delivery until they are put again.
 */
function prunedAfterFirstDelivery(vault: Vault): { vault: Vault; puts: () => number } {
  const lost = new Set<string>();
  let deliveries = 0;
  let puts = 0;
  const proxy = new Proxy(vault, {
    get: (t, k) => {
      if (k === 'deliver')
        return async (ids: readonly string[], scope?: StoreScope) => {
          const result = await t.deliver(
            ids.filter((id) => !lost.has(id)),
            scope,
          );
          const missing = [...result.missing, ...ids.filter((id) => lost.has(id))];
          if (deliveries++ === 0) for (const id of ids) lost.add(id);
          return { ...result, missing };
        };
      // Retention released the session's pins before it pruned: the store delivers again.
      if (k === 'sessionPins') return async (scope: StoreScope) => (deliveries > 0 ? undefined : t.sessionPins(scope));
      if (k === 'put')
        return async (...args: Parameters<Vault['put']>) => {
          const result = await t.put(...args);
          puts++;
          lost.delete(result.artifactId);
          return result;
        };
      return Reflect.get(t, k, t) as unknown;
    },
  });
  return { vault: proxy, puts: () => puts };
}

describe('a bounded view whose artifact was found gone', () => {
  // The host reuses its objects: each request is the previous one's items and one more.
  const head: unknown[] = [
    { role: 'user', content: 'Fix the build.' },
    {
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'c1', type: 'function', function: { name: 'terminal', arguments: '{"command":"make"}' } }],
    },
    { role: 'tool', tool_call_id: 'c1', content: OUTPUT },
  ];
  const requests: ProviderRequest[] = [];
  let items = head;
  for (let n = 0; n < 3; n++) {
    if (n > 0) items = [...items, { role: n % 2 === 1 ? 'assistant' : 'user', content: `turn ${n}` }];
    requests.push({ model: 'gpt-4o', messages: items });
  }
  const shown = async (pruned: boolean, name: string): Promise<{ texts: string[]; puts: number }> => {
    const real = await createVault({ path: join(dir, `${name}.sqlite3`) });
    const vault = pruned ? prunedAfterFirstDelivery(real) : { vault: real, puts: () => 0 };
    try {
      const op = collapseDuplicates({
        vault: vault.vault,
        minArtifactChars: 300,
        maxInlineChars: 700,
        inlineViewChars: 250,
      });
      const outs = await runAll(
        (src) => src.pipe(op),
        requests.map((r, i) => [r, { sessionId: 's', requestId: `r${i}` }] as const),
      );
      return {
        texts: outs.map((o) => String((o.value['messages'] as { content: unknown }[])[2]!.content)),
        puts: vault.puts(),
      };
    } finally {
      await real.close();
    }
  };

  it('stays inline in the request that found it gone and is a view again in the next, which extends it', async () => {
    const { texts: views } = await shown(false, 'kept');
    expect(views.every((v) => v !== OUTPUT && v.length < OUTPUT.length)).toBe(true); // a view every request
    const { texts, puts } = await shown(true, 'pruned');
    expect(texts[0]).toBe(views[0]);
    expect(texts[1]).toBe(OUTPUT); // gone at delivery: the content stays inline
    expect(texts[2]).toBe(views[2]); // stored again: the view is back
    expect(puts).toBe(2);
  });
});
