/**
 * The batch put (`putMany`): the same ids, rows and provenance as the single puts of its inputs in
 * order, in one write transaction, on both dialects; a bad input fails only its own slot.
 */
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { VaultArgumentError, VaultContentError } from '../../src/vault/index.js';
import type { PutInput, PutResult, Vault } from '../../src/vault/types.js';
import { DIALECTS, freshStore, type FreshStore } from './dialects.js';
import { countOf, statementsDuring } from './helpers.js';

const NOW = Date.parse('2026-03-01T00:00:00Z');

/** Every row the puts write, in a stable order (content compared through its digest). */
async function rowsOf(store: FreshStore): Promise<unknown> {
  const db = store.raw();
  return {
    artifacts: await db
      .selectFrom('artifacts')
      .select(['seq', 'artifact_id', 'sha256', 'char_count', 'byte_count', 'tool_name', 'created_at'])
      .select('last_observed_at')
      .orderBy('seq')
      .execute(),
    observations: await db
      .selectFrom('artifact_observations')
      .selectAll()
      .orderBy('artifact_id')
      .orderBy('tool_call_id')
      .execute(),
    access: await db.selectFrom('artifact_access').selectAll().orderBy('artifact_id').orderBy('session_id').execute(),
    tools: await db.selectFrom('artifact_tools').selectAll().orderBy('artifact_id').orderBy('tool_name').execute(),
    meta: await db.selectFrom('vault_meta').selectAll().orderBy('key').execute(),
  };
}

/** What a put gave: its result, or its error's class and message. */
const settled = (r: PutResult | Error): unknown => (r instanceof Error ? [r.name, r.message] : r);

const input = fc.record({
  content: fc.oneof(fc.constantFrom('a', 'b', 'ccc', 'évidence αβγ\n', '', '\uD800 lone'), fc.string({ maxLength: 4 })),
  toolName: fc.constantFrom('terminal', 'grep', ''),
  callId: fc.constantFrom('c1', 'c2'),
  sessionId: fc.constantFrom('s1', 's2'),
});

for (const dialect of DIALECTS) {
  describe(`putMany on ${dialect}`, () => {
    let singles: FreshStore;
    let batched: FreshStore;
    beforeEach(async () => {
      [singles, batched] = await Promise.all([freshStore(dialect), freshStore(dialect)]);
    });
    afterEach(async () => {
      await Promise.all([singles.cleanup(), batched.cleanup()]);
    });

    it('stores what the single puts of its inputs store, in order: same results, rows and provenance', async () => {
      const [one, many] = (await Promise.all([
        singles.open({ clock: () => NOW }),
        batched.open({ clock: () => NOW }),
      ])) as [Vault, Vault];
      const scope = { tenant: 'k_t', sessionId: 's1' };
      await fc.assert(
        fc.asyncProperty(
          fc.array(input, { maxLength: 3 }),
          fc.array(input, { maxLength: 6 }),
          async (before, batch) => {
            // Content stored before (by either store alike), then the batch against the single puts.
            for (const i of before)
              await Promise.all([one.put(i, scope), many.put(i, scope)].map((p) => p.catch(() => 0)));
            const want: unknown[] = [];
            for (const i of batch) want.push(settled(await one.put(i, scope).catch((e: Error) => e)));
            expect((await many.putMany!(batch, scope)).map(settled)).toEqual(want);
          },
        ),
        { numRuns: dialect === 'postgres' ? 15 : 40 },
      );
      expect(await rowsOf(batched)).toEqual(await rowsOf(singles));
      expect(await many.usage()).toEqual(await one.usage());
    });

    it('prunes what it stored before when a later input needs room, as the single puts do', async () => {
      const limits = { maxBytes: 500, highWaterPct: 80, lowWaterPct: 50, clock: () => NOW };
      const [one, many] = (await Promise.all([singles.open(limits), batched.open(limits)])) as [Vault, Vault];
      // The third input passes the high water: retention deletes the first two, provenance and all.
      const batch = ['a', 'b', 'c', 'd'].map((tag) => ({
        content: `${tag}:`.padEnd(180, tag),
        callId: tag,
        sessionId: 's1',
      }));
      for (const i of batch) await one.put(i);
      // The results differ: a batch reads its new content back after its transaction, pruned or not.
      await many.putMany!(batch);
      expect(await rowsOf(batched)).toEqual(await rowsOf(singles));
      expect((await many.usage()).prunedArtifacts).toBeGreaterThan(0);
    });

    it('reports a bad input in its own slot and stores the others; the single put throws the same error', async () => {
      const v = await batched.open();
      const inputs: PutInput[] = [{ content: 'first' }, { content: 'bad \uD800' }, { content: 'third' }];
      const [a, bad, c] = await v.putMany!(inputs);
      expect(bad).toBeInstanceOf(VaultContentError);
      await expect(v.put(inputs[1]!)).rejects.toThrow((bad as Error).message);
      for (const [r, text] of [
        [a, 'first'],
        [c, 'third'],
      ] as const) {
        expect(r).toMatchObject({ created: true });
        expect(await v.read((r as PutResult).artifactId)).toBe(text);
      }
      expect(await v.putMany!([{ content: 42 as unknown as string }])).toMatchObject([{ name: 'VaultArgumentError' }]);
      await expect(v.putMany!({ content: 'x' } as unknown as PutInput[])).rejects.toThrow(VaultArgumentError);
      expect((await v.usage()).artifacts).toBe(2);
    });
  });
}

describe('putMany on sqlite', () => {
  it('writes its new inputs in one transaction, its counters and provenance rows in one statement each', async () => {
    const store = await freshStore('sqlite');
    try {
      const v = await store.open();
      const inputs = (tag: string): PutInput[] => [1, 2, 3].map((k) => ({ content: `${tag} ${k}`, toolName: 't' }));
      const batch = await statementsDuring(() => v.putMany!(inputs('batch')));
      const single = await statementsDuring(async () => {
        for (const i of inputs('single')) await v.put(i);
      });
      expect([countOf(batch, 'begin'), countOf(single, 'begin')]).toEqual([1, 3]);
      // One lock of the byte counter, one update per counter, one insert per provenance table.
      const rows = (counts: Map<string, number>): number[] =>
        ['select "value" from "vault_meta"', 'update "vault_meta"', 'insert into "artifact_observations"'].map((s) =>
          countOf(counts, s),
        );
      expect([rows(batch), rows(single)]).toEqual([
        [1, 2, 1],
        [3, 6, 3],
      ]);
    } finally {
      await store.cleanup();
    }
  });
});
