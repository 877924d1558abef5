/**
 * The dialects every storage contract test runs on (kysely's DIALECTS pattern): a test file loops
 * over DIALECTS and describes the same behaviour once per dialect. `fresh()` gives an empty store
 * of that dialect (a temp SQLite file, or a private schema in the test PostgreSQL database) with a
 * second, raw kysely handle on it for the assertions that read rows directly.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Kysely, PostgresDialect, SqliteDialect, sql } from 'kysely';
import pg from 'pg';
import { inject } from 'vitest';
import type { VaultDatabase } from '../../src/vault/schema.js';
import { createVault, type VaultOptions } from '../../src/vault/index.js';
import type { Vault } from '../../src/vault/types.js';
import { freshSchema } from '../support/postgres.js';

export type DialectName = 'sqlite' | 'postgres';

export interface FreshStore {
  readonly dialect: DialectName;
  /** `{ path }` or `{ url }`: spread into createVault / openLedger options. */
  readonly location: { readonly path: string } | { readonly url: string };
  /** Open a vault on this store (closed by `cleanup`). */
  open(options?: Omit<VaultOptions, 'path' | 'url'>): Promise<Vault>;
  /** A raw kysely handle on the same store, for direct row reads and writes. */
  raw(): Kysely<VaultDatabase>;
  /** The value for the content column (text on SQLite, bytes on PostgreSQL). */
  encode(content: string): string | Uint8Array;
  /** Record a schema version as a newer release would. */
  setSchemaVersion(version: number): Promise<void>;
  cleanup(): Promise<void>;
}

// Without a PostgreSQL server (no binaries, not under CI: test/support/global-setup.ts) only SQLite runs.
export const DIALECTS: readonly DialectName[] = inject('pgUrl') === '' ? ['sqlite'] : ['sqlite', 'postgres'];

export async function freshStore(dialect: DialectName, name = 'vault.sqlite3'): Promise<FreshStore> {
  const vaults: Vault[] = [];
  const raws: Kysely<VaultDatabase>[] = [];
  let location: FreshStore['location'];
  let drop: () => Promise<void>;
  let makeRaw: () => Kysely<VaultDatabase>;
  let setVersion: (v: number) => Promise<void>;
  if (dialect === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'tt-vault-'));
    const path = join(dir, name);
    location = { path };
    drop = async () => rmSync(dir, { recursive: true, force: true });
    makeRaw = () => new Kysely<VaultDatabase>({ dialect: new SqliteDialect({ database: new Database(path) }) });
    setVersion = async (v) => {
      const db = new Database(path);
      db.pragma(`user_version = ${v}`);
      db.close();
    };
  } else {
    const schema = await freshSchema(inject('pgUrl'));
    location = { url: schema.url };
    drop = schema.drop;
    makeRaw = () =>
      new Kysely<VaultDatabase>({
        dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: schema.url, max: 2 }) }),
      });
    setVersion = async (v) => {
      const db = makeRaw();
      await sql`UPDATE tt_schema_version SET version = ${v} WHERE name = 'vault'`.execute(db);
      await db.destroy();
    };
  }
  return {
    dialect,
    location,
    async open(options = {}) {
      const v = await createVault({ ...options, ...location });
      vaults.push(v);
      return v;
    },
    raw() {
      const db = makeRaw();
      raws.push(db);
      return db;
    },
    encode: (content) => (dialect === 'sqlite' ? content : Buffer.from(content, 'utf8')),
    setSchemaVersion: (v) => setVersion(v),
    async cleanup() {
      for (const v of vaults.splice(0)) await v.close();
      for (const r of raws.splice(0)) await r.destroy();
      await drop();
    },
  };
}
