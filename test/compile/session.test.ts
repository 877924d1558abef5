/**
 * The per-session derived cache (src/compile/session.ts): bounded by entries and by characters,
 * least recently used first, with storage that grows with what it holds instead of being
 * allocated for the entry bound up front (the memory bench measures the bytes; this checks the
 * bounds and the order the cache must keep while doing so).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sessionStateFactory } from '../../src/compile/session.js';
import { createVault, type Vault } from '../../src/vault/index.js';

const dir = mkdtempSync(join(tmpdir(), 'tt-session-pool-'));
let vault: Vault;
beforeAll(async () => {
  vault = await createVault({ path: join(dir, 'vault.sqlite3') });
});
afterAll(async () => {
  await vault.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('SessionState.derived', () => {
  it('keeps at most 4,096 entries, dropping the least recently used', () => {
    const { derived } = sessionStateFactory({ vault })({ sessionId: 's' });
    expect(derived.max).toBe(0); // lru-cache's own `max` would allocate storage for 4,096 entries up front
    for (let i = 0; i < 4096; i++) derived.set(`k${i}`, { value: i, chars: 1 });
    expect(derived.get('k0')?.value).toBe(0); // used: now the most recent
    for (let i = 4096; i < 5000; i++) derived.set(`k${i}`, { value: i, chars: 1 });
    expect(derived.size).toBe(4096);
    expect(derived.get('k0')?.value).toBe(0);
    expect(derived.has('k1')).toBe(false);
    expect(derived.has(`k${5000 - 4096}`)).toBe(false);
    expect(derived.get(`k${5000 - 4095}`)?.value).toBe(5000 - 4095);
    expect(derived.get('k4999')?.value).toBe(4999);
  });

  it('keeps at most 8,000,000 characters, dropping the least recently used', () => {
    const { derived } = sessionStateFactory({ vault })({ sessionId: 's' });
    for (let i = 0; i < 4; i++) derived.set(`big${i}`, { value: i, chars: 2_500_000 });
    expect(derived.size).toBe(3);
    expect(derived.has('big0')).toBe(false);
    expect(derived.calculatedSize).toBe(7_500_000);
    derived.set('over', { value: 'x', chars: 8_000_001 }); // larger than the whole bound: not kept
    expect(derived.has('over')).toBe(false);
    expect(derived.size).toBe(3);
  });

  it('gives each state its own cache', () => {
    const make = sessionStateFactory({ vault });
    const a = make({ sessionId: 'a' });
    a.derived.set('k', { value: 1, chars: 1 });
    expect(make({ sessionId: 'b' }).derived.has('k')).toBe(false);
  });

  it("gives two tenants' sessions of the same id separate states, each reading in its own scope", () => {
    const make = sessionStateFactory({ vault });
    const a = make({ sessionId: 's', tenant: 'ta' });
    a.derived.set('verified:a_1', { value: true, chars: 1 });
    const b = make({ sessionId: 's', tenant: 'tb' });
    expect(b).not.toBe(a);
    expect(b.derived.has('verified:a_1')).toBe(false);
    expect(b.reads.scope).toEqual({ tenant: 'tb', sessionId: 's' });
    expect(a.reads.scope).toEqual({ tenant: 'ta', sessionId: 's' });
    expect('page' in b.vault || 'verify' in b.vault || 'search' in b.vault).toBe(false);
  });
});
