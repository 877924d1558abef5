/**
 * The conversation memo (src/compile/conversation.ts): what one request decided is recorded with
 * `markRequest` in one vault transaction, and leaves the memo and the vault exactly as
 * `markRewritten` and `markShown` per key, in order, would.
 */
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createConversationMemo, type ConversationMemo } from '../../src/compile/conversation.js';
import { faultyVault } from '../../src/testing/faults.js';
import { createVault, type Vault } from '../../src/vault/index.js';
import { countOf, statementsDuring, tempDir } from '../vault/helpers.js';

let dir: string;
let cleanup: () => void;
let vault: Vault;
beforeEach(async () => {
  ({ dir, cleanup } = tempDir('tt-conversation-'));
  vault = await createVault({ path: join(dir, 'vault.sqlite3') });
});
afterEach(async () => {
  await vault.close();
  cleanup();
});

const CAP = 2;
/** Requests in order: each shows some keys (one twice, one past the cap) and may rewrite some. */
const REQUESTS: readonly { key: string; shown: string[]; rewritten: { key: string; kind: string }[] }[] = [
  { key: 'r1', shown: ['a', 'b', 'a'], rewritten: [] },
  { key: 'r1', shown: ['a', 'c'], rewritten: [] }, // the same request again: counted once
  { key: 'r2', shown: ['a', 'b', 'c'], rewritten: [{ key: 'x', kind: 'digest' }] },
  { key: 'r3', shown: ['a', 'b', 'd'], rewritten: [{ key: 'y', kind: 'receipt' }] }, // a and b are capped
  { key: 'r4', shown: [], rewritten: [{ key: 'x', kind: 'receipt' }] },
];

async function perKey(memo: ConversationMemo): Promise<void> {
  for (const r of REQUESTS) {
    for (const d of r.rewritten) await memo.markRewritten(d.key, d.kind);
    for (const key of r.shown) await memo.markShown(key, r.key);
  }
}

async function batched(memo: ConversationMemo): Promise<void> {
  for (const r of REQUESTS) await memo.markRequest(r.key, { shown: r.shown, rewritten: r.rewritten });
}

/** What a memo answers about every key, asked as the requests r1…r5 would. */
async function answers(memo: ConversationMemo): Promise<unknown[]> {
  const out: unknown[] = [];
  for (const key of ['a', 'b', 'c', 'd', 'e'])
    for (const r of ['r1', 'r3', 'r5']) out.push([key, r, await memo.shownBefore(key, r)]);
  for (const key of ['x', 'y', 'z']) out.push([key, await memo.rewritten(key)]);
  return out;
}

async function stored(sessionId: string): Promise<(string | undefined)[]> {
  const keys = ['a', 'b', 'c', 'd', 'e'].map((k) => `tt:shown:${k}`).concat(['x', 'y'].map((k) => `tt:rewritten:${k}`));
  return Promise.all(keys.map((k) => vault.getRendering(sessionId, k)));
}

describe('ConversationMemo.markRequest', () => {
  it('leaves the memo and the vault as marking each key in order does, in this process and the next', async () => {
    const one = createConversationMemo(vault, 'one-by-one', CAP);
    const batch = createConversationMemo(vault, 'batched', CAP);
    await perKey(one);
    await batched(batch);
    expect(await answers(batch)).toEqual(await answers(one));
    expect(await stored('batched')).toEqual(await stored('one-by-one'));
    // a and b were shown by r1, r2 and r3 (capped at 2), c by r1 (twice) and r2, d by r3.
    expect(await stored('batched')).toEqual(['2 r2', '2 r2', '2 r2', '1 r3', undefined, 'receipt', 'receipt']);
    // A new process (a fresh memo over the same vault) answers as the one that wrote.
    expect(await answers(createConversationMemo(vault, 'batched', CAP))).toEqual(await answers(one));
  });

  it('writes what one request decided in one transaction, and nothing when nothing changed', async () => {
    const memo = createConversationMemo(vault, 's', CAP);
    await memo.markRequest('r0', { shown: ['warm'] });
    const counts = await statementsDuring(async () => {
      await memo.markRequest('r1', {
        shown: ['a', 'b', 'c', 'warm'],
        rewritten: [
          { key: 'x', kind: 'digest' },
          { key: 'y', kind: 'receipt' },
        ],
      });
    });
    expect(countOf(counts, 'begin immediate')).toBe(1);
    expect(countOf(counts, 'commit')).toBe(1);
    expect(countOf(counts, 'insert into "session_renderings"')).toBe(1);
    expect(await vault.getRendering('s', 'tt:shown:warm')).toBe('2 r1');
    // Every key known in memory and already counted for this request: no promise, no write.
    expect(memo.markRequest('r1', { shown: ['a', 'b', 'c'] })).toBeUndefined();
  });

  it('swallows a failing vault write and still remembers the marks in memory', async () => {
    const broken = faultyVault(vault, { failOn: ['setRenderings'] });
    const memo = createConversationMemo(broken, 's', CAP);
    await expect(memo.markRequest('r1', { shown: ['a'], rewritten: [{ key: 'x', kind: 'digest' }] })).resolves.toBe(
      undefined,
    );
    expect(broken.faultLog.faults).toBe(1);
    expect(await memo.shownBefore('a', 'r2')).toBe(1);
    expect(await memo.rewritten('x')).toBe('digest');
    // Nothing reached the vault: a new process has to learn it again.
    expect(await createConversationMemo(vault, 's', CAP).shownBefore('a', 'r2')).toBe(0);
  });

  it('markRewritten and markShown swallow a failing write the same way, one row each', async () => {
    const broken = faultyVault(vault, { failOn: ['setRendering'] });
    const memo = createConversationMemo(broken, 's', CAP);
    await expect(memo.markRewritten('x', 'digest')).resolves.toBe(undefined);
    await expect(memo.markShown('a', 'r1')).resolves.toBe(undefined);
    expect(broken.faultLog).toEqual({ calls: { setRendering: 2, getRendering: 1 }, faults: 2 });
    expect(await memo.rewritten('x')).toBe('digest');
    expect(await memo.shownBefore('a', 'r2')).toBe(1);
    expect(await stored('s')).toEqual([undefined, undefined, undefined, undefined, undefined, undefined, undefined]);
  });
});
