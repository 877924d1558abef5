/** Retention (high/low water, protections, LRU order, refusal), once per dialect. */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ArtifactNotFoundError, VaultCapacityError } from '../../src/errors.js';
import { META } from '../../src/vault/schema.js';
import type { Vault } from '../../src/vault/index.js';
import { ROOM_BACKOFF_MS, watermarks } from '../../src/vault/retention.js';
import { DIALECTS, freshStore, type FreshStore } from './dialects.js';

/** ASCII content of exactly `bytes` bytes, distinct per tag. */
const blob = (tag: string, bytes: number): string => `${tag}:`.padEnd(bytes, tag);
const LIMITS = { maxBytes: 500, highWaterPct: 80, lowWaterPct: 50 } as const;

describe('watermarks', () => {
  it('computes high/low marks and keeps low below high', () => {
    expect(watermarks(500, 80, 50)).toEqual({ capacityBytes: 500, highWaterBytes: 400, lowWaterBytes: 250 });
    expect(watermarks(1000, 90, 95)).toEqual({ capacityBytes: 1000, highWaterBytes: 900, lowWaterBytes: 890 });
    expect(watermarks(1, 2, 0).highWaterBytes).toBe(1);
  });
});

for (const dialect of DIALECTS) {
  describe(`retention on ${dialect}`, () => {
    let store: FreshStore;
    let vault: Vault;
    beforeEach(async () => {
      store = await freshStore(dialect, 'r.sqlite3');
      vault = await store.open(LIMITS);
    });
    afterEach(async () => {
      await store.cleanup();
    });

    it('prunes only the unprotected artifact (reference vector)', async () => {
      const a = await vault.put({ content: blob('a', 180) });
      await vault.setBaseline('terminal|git status', a.artifactId);
      const b = await vault.put({ content: blob('b', 180) });
      const c = await vault.put({ content: blob('c', 180) });
      expect(await vault.usage()).toEqual({
        artifacts: 2,
        bytes: 360,
        capacityBytes: 500,
        highWaterBytes: 400,
        lowWaterBytes: 250,
        prunedArtifacts: 1,
        prunedBytes: 180,
      });
      expect((await vault.page(a.artifactId)).content).toBe(blob('a', 180));
      expect((await vault.page(c.artifactId)).content).toBe(blob('c', 180));
      await expect(vault.page(b.artifactId)).rejects.toBeInstanceOf(ArtifactNotFoundError);
      expect(await vault.search('bbbb')).toEqual([]);
    });

    it('never prunes pinned or exposed artifacts, and prunes the least recently observed first', async () => {
      const pinned = await vault.put({ content: blob('p', 100) });
      await vault.pin([pinned.artifactId, 'a_not_there']);
      const leased = await vault.put({ content: blob('l', 100) });
      expect(await vault.claimExposure('s', leased.artifactId, 'r1', 1)).toBe(true);
      const older = await vault.put({ content: blob('o', 100) });
      const newer = await vault.put({ content: blob('n', 50) });
      await vault.put({ content: blob('o', 100), callId: 'seen again' }); // `older` is now the most recent
      const incoming = await vault.put({ content: blob('i', 100) }); // 350 + 100 > 400 → prune to ≤ 150
      const alive = async (id: string) => (await vault.summary(id)) !== undefined;
      expect(await alive(pinned.artifactId)).toBe(true);
      expect(await alive(leased.artifactId)).toBe(true);
      expect(await alive(incoming.artifactId)).toBe(true);
      expect(await alive(newer.artifactId)).toBe(false);
      expect(await alive(older.artifactId)).toBe(false);
      expect((await vault.usage()).bytes).toBe(300);
      expect((await vault.usage()).prunedArtifacts).toBe(2);
    });

    it('prunes the least recently observed first, not the oldest created', async () => {
      await vault.close();
      const lru = await freshStore(dialect, 'lru.sqlite3');
      let now = Date.parse('2026-01-01T00:00:00Z');
      const clock = () => (now += 1000);
      vault = await lru.open({ ...LIMITS, clock });
      const x = await vault.put({ content: blob('x', 100) });
      const y = await vault.put({ content: blob('y', 100) });
      const w = await vault.put({ content: blob('w', 150) });
      await vault.put({ content: blob('x', 100), callId: 'x seen again' });
      await vault.put({ content: blob('z', 60) }); // 410 > 400 → prune down to ≤ 190
      expect(await vault.summary(x.artifactId)).toBeDefined();
      expect(await vault.summary(y.artifactId)).toBeUndefined();
      expect(await vault.summary(w.artifactId)).toBeUndefined();
      expect((await vault.usage()).bytes).toBe(160);
      await lru.cleanup();
    });

    it('refuses without writing (and without pruning) when protected artifacts leave no room', async () => {
      const p = await vault.put({ content: blob('p', 300) });
      await vault.pin([p.artifactId]);
      const loose = await vault.put({ content: blob('x', 100) });
      const before = await vault.usage();
      await expect(vault.put({ content: blob('z', 250), toolName: 'big', sessionId: 's' })).rejects.toBeInstanceOf(
        VaultCapacityError,
      );
      expect(await vault.usage()).toEqual(before);
      expect(await vault.summary(loose.artifactId)).toBeDefined();
      const db = store.raw();
      const count = async (q: ReturnType<typeof db.selectFrom<'artifacts' | 'artifact_observations'>>) =>
        Number((await q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);
      expect(await count(db.selectFrom('artifact_observations').where('session_id', '=', 's'))).toBe(0);
      expect(await count(db.selectFrom('artifacts'))).toBe(2);
    });

    it('after a refusal, spares puts a pass for ROOM_BACKOFF_MS of its clock, or until a session closes through it', async () => {
      await vault.close();
      const fresh = await freshStore(dialect, 'backoff.sqlite3');
      let now = Date.parse('2026-01-01T00:00:00Z');
      vault = await fresh.open({ ...LIMITS, clock: () => now });
      const scope = { sessionId: 'live' };
      const held = await vault.put({ content: blob('p', 300), sessionId: 'live' });
      await vault.pin([held.artifactId], scope);
      const loose = await vault.put({ content: blob('x', 100) });
      await expect(vault.put({ content: blob('z', 250) })).rejects.toBeInstanceOf(VaultCapacityError);
      // 400 + 150 passes the capacity; a pass would prune `loose` and make room, the backoff runs none.
      await expect(vault.put({ content: blob('y', 150) })).rejects.toBeInstanceOf(VaultCapacityError);
      expect(await vault.summary(loose.artifactId)).toBeDefined();
      now += ROOM_BACKOFF_MS - 1;
      await expect(vault.put({ content: blob('y', 150) })).rejects.toBeInstanceOf(VaultCapacityError);
      now += 1;
      const y = await vault.put({ content: blob('y', 150), sessionId: 'live' });
      await vault.pin([y.artifactId], scope);
      expect(await vault.summary(loose.artifactId)).toBeUndefined();
      expect((await vault.usage()).bytes).toBe(450);
      // Refused again (a new backoff); the session closed through this vault object ends it at once.
      await expect(vault.put({ content: blob('w', 250) })).rejects.toBeInstanceOf(VaultCapacityError);
      await vault.closeSession(scope);
      const w = await vault.put({ content: blob('w', 250) });
      expect(await vault.summary(held.artifactId)).toBeUndefined();
      expect((await vault.page(w.artifactId)).content).toBe(blob('w', 250));
      await fresh.cleanup();
    });

    it('refuses an artifact larger than the whole vault', async () => {
      await expect(vault.put({ content: blob('h', 501) })).rejects.toBeInstanceOf(VaultCapacityError);
      expect((await vault.usage()).artifacts).toBe(0);
    });

    it('does not prune for a repeat put of stored content', async () => {
      await vault.put({ content: blob('a', 200) });
      await vault.put({ content: blob('b', 200) });
      await vault.put({ content: blob('a', 200), callId: 'again' });
      expect(await vault.usage()).toMatchObject({ artifacts: 2, bytes: 400, prunedArtifacts: 0 });
    });

    it('recounts the byte counter from the rows when reopened', async () => {
      await vault.put({ content: blob('a', 120) });
      await vault.close();
      await store.raw().updateTable('vault_meta').set({ value: 999 }).where('key', '=', META.bytes).execute();
      vault = await store.open(LIMITS);
      expect((await vault.usage()).bytes).toBe(120);
    });
  });
}
