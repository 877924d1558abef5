/**
 * The evidence store's memoized deliveries over time: a session whose every receipt was delivered
 * before is kept alive past the touch interval by an empty delivery (its pin epoch unchanged, the
 * artifacts are not read back again), and delivers everything again once its pins were released.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createEvidenceStore } from '../../src/compile/evidence.js';
import { createDigests } from '../../src/ledger/digests.js';
import { createVault } from '../../src/vault/index.js';
import type { StoreScope, Vault } from '../../src/vault/types.js';

const dir = mkdtempSync(join(tmpdir(), 'tt-evidence-delivery-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
beforeEach(() => {
  vi.useFakeTimers({ toFake: ['Date'] });
  vi.setSystemTime(Date.parse('2026-06-01T00:00:00Z'));
});
afterEach(() => vi.useRealTimers());

const scope: StoreScope = { tenant: 't', sessionId: 's' };

/** The vault, with the number of ids of each delivery it was asked for. */
function counted(vault: Vault): { vault: Vault; deliveries: number[] } {
  const deliveries: number[] = [];
  const proxy = new Proxy(vault, {
    get: (t, k) =>
      k === 'deliver'
        ? (ids: readonly string[], ...rest: unknown[]) => {
            deliveries.push(ids.length);
            return (t.deliver as (...a: unknown[]) => unknown)(ids, ...rest);
          }
        : (Reflect.get(t, k, t) as unknown),
  });
  return { vault: proxy, deliveries };
}

async function session(name: string) {
  const path = join(dir, `${name}.sqlite3`);
  const real = await createVault({ path });
  const { vault, deliveries } = counted(real);
  const store = createEvidenceStore(vault, createDigests());
  store.begin(scope);
  const ids: string[] = [];
  for (let i = 0; i < 5; i++)
    ids.push(
      (await store.receipt(`output ${i}\n${'x'.repeat(400)}`, { toolName: 'terminal', sessionId: 's', scope }))
        .artifactId,
    );
  expect(await store.deliver(ids, scope)).toEqual([]);
  return { path, real, store, ids, deliveries };
}

describe('memoized deliveries past the touch interval', () => {
  it('keep the session alive with an empty delivery, without reading every artifact back', async () => {
    const { real, store, ids, deliveries } = await session('alive');
    try {
      vi.setSystemTime(Date.now() + 10_000);
      expect(await store.deliver(ids, scope)).toEqual([]);
      expect(deliveries).toEqual([5]); // within the interval: the epoch is read, nothing delivered
      vi.setSystemTime(Date.now() + 31_000);
      expect(await store.deliver(ids, scope)).toEqual([]);
      expect(deliveries).toEqual([5, 0]);
      expect((await real.sessionPins(scope))!.lastSeenMs).toBe(Date.now()); // kept alive
    } finally {
      await real.close();
    }
  });

  it('deliver every id again when the touch finds the session pins released (a new epoch)', async () => {
    const { path, real, store, ids, deliveries } = await session('released');
    try {
      // What retention does to a released session: its row goes, and the next write makes a new epoch.
      const db = new Database(path);
      db.prepare('DELETE FROM vault_sessions WHERE tenant = ? AND session_id = ?').run('t', 's');
      db.close();
      vi.setSystemTime(Date.now() + 31_000);
      expect(await store.deliver(ids, scope)).toEqual([]);
      expect(deliveries).toEqual([5, 0, 5]);
    } finally {
      await real.close();
    }
  });
});

describe('a long history named again', () => {
  it('looks up only the ids after the run the last delivery named, and delivers the same ones', async () => {
    const { real, store, ids, deliveries } = await session('lead');
    try {
      const text = (i: number): string => `output ${i}\n${'y'.repeat(400)}`;
      for (let i = 5; i < 300; i++)
        ids.push((await store.receipt(text(i), { toolName: 'terminal', sessionId: 's', scope })).artifactId);
      expect(await store.deliver(ids, scope)).toEqual([]);
      const next = [
        ...ids,
        (await store.receipt(text(300), { toolName: 'terminal', sessionId: 's', scope })).artifactId,
      ];
      const has = Set.prototype.has;
      let lookups = 0;
      Set.prototype.has = function (this: Set<unknown>, v: unknown) {
        lookups++;
        return has.call(this, v);
      };
      const gone = await store.deliver(next, scope).finally(() => (Set.prototype.has = has));
      expect(gone).toEqual([]);
      expect(deliveries).toEqual([5, 295, 1]); // the new id only, as without the carried run
      expect(lookups).toBeLessThan(20);
    } finally {
      await real.close();
    }
  });
});
