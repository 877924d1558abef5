/**
 * SQLite-only vault behaviour: WAL and pragmas, file permissions (0700 directory, 0600 file and
 * side files), in-memory vaults, and the deferred FTS5 queue. Everything both dialects share is
 * in contract.test.ts, run once per dialect.
 */
import { statSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SCHEMA_VERSION, createVault, type Vault, type VaultOptions } from '../../src/vault/index.js';
import { tempDir } from './helpers.js';

let dir: string;
let cleanup: () => void;
const open: Vault[] = [];

beforeEach(() => {
  ({ dir, cleanup } = tempDir());
});
afterEach(async () => {
  for (const v of open.splice(0)) await v.close();
  cleanup();
});

async function vaultAt(options: Partial<VaultOptions> = {}): Promise<Vault> {
  const v = await createVault({ path: join(dir, 'vault.sqlite3'), ...options });
  open.push(v);
  return v;
}

function rawDb(): Database.Database {
  return new Database(join(dir, 'vault.sqlite3'));
}

describe('opening a SQLite file', () => {

  it('uses WAL, NORMAL sync, foreign keys, busy timeout and records the schema version', async () => {
    const v = await vaultAt({ busyTimeoutMs: 1234 });
    await v.put({ content: 'x' });
    const db = rawDb();
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(db.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    expect(db.prepare("SELECT name FROM kysely_migration").pluck().all()).toEqual(['0001_initial', '0002_session_state', '0003_scoped_pins']);
    db.close();
  });


  it('creates the directory 0700 and the files 0600', async () => {
    const path = join(dir, 'nested', 'deeper', 'vault.sqlite3');
    const v = await createVault({ path });
    open.push(v);
    await v.put({ content: 'private' });
    expect(statSync(join(dir, 'nested', 'deeper')).mode & 0o777).toBe(0o700);
    for (const f of [path, `${path}-wal`, `${path}-shm`]) expect(statSync(f).mode & 0o777, f).toBe(0o600);
  });

  it('works in memory', async () => {
    const v = await createVault({ path: ':memory:' });
    const { artifactId } = await v.put({ content: 'transient' });
    expect((await v.page(artifactId)).content).toBe('transient');
    expect(v.path).toBe(':memory:');
    await v.close();
  });

});

describe('search index', () => {
  const pendingRows = (): number => {
    const db = rawDb();
    const n = db.prepare('SELECT COUNT(*) FROM fts_pending').pluck().get() as number;
    db.close();
    return n;
  };

  it('queues new content at put and indexes it before the first search', async () => {
    const v = await vaultAt({ indexInBackground: false });
    await v.put({ content: 'queued evidence one' });
    await v.put({ content: 'queued evidence two' });
    await v.put({ content: 'queued evidence one', callId: 'repeat' });
    expect(pendingRows()).toBe(2);
    expect(await v.search('evidence')).toHaveLength(2);
    expect(pendingRows()).toBe(0);
  });

  it('indexes in the background when idle', async () => {
    const v = await vaultAt();
    await v.put({ content: 'background evidence' });
    for (let i = 0; i < 200 && pendingRows() > 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(pendingRows()).toBe(0);
    expect((await v.search('background')).length).toBe(1);
  });

  it('another connection indexes what this one queued', async () => {
    const writer = await vaultAt({ indexInBackground: false });
    const { artifactId } = await writer.put({ content: 'written by another process' });
    const reader = await vaultAt({ indexInBackground: false });
    expect((await reader.search('another PROCESS')).map((r) => r.artifactId)).toEqual([artifactId]);
    expect(pendingRows()).toBe(0);
  });
});
