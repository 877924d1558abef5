/**
 * The prepared-statement memo (src/vault/prepared.ts): a statement built and compiled once per
 * connection runs as the query kysely would build anew, on both dialects, and a template compiled
 * for one connection is never used on another (another file, another dialect).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { VaultConnection } from '../../src/vault/dialect.js';
import { openPostgresVault } from '../../src/vault/dialect/postgres/postgres-vault.js';
import { openSqliteVault } from '../../src/vault/dialect/sqlite/sqlite-vault.js';
import { PREPARED_ROWS_MAX, prepared, preparedRows } from '../../src/vault/prepared.js';
import { DIALECTS, freshStore, type DialectName, type FreshStore } from './dialects.js';

async function connect(store: FreshStore): Promise<VaultConnection> {
  return 'path' in store.location
    ? openSqliteVault({ path: store.location.path, busyTimeoutMs: 1000, indexInBackground: false })
    : openPostgresVault({ url: store.location.url, busyTimeoutMs: 1000, poolSize: 2, statementTimeoutMs: 10_000 });
}

/** A statement that counts its builds, with the dialect's lock clause in it. */
function renderingStatement() {
  const built: string[] = [];
  const statement = prepared((conn: VaultConnection, sessionId: string, key: string) => {
    built.push(conn.location);
    return conn.lock(
      conn.db
        .selectFrom('session_renderings')
        .select(['render_key as key', 'value'])
        .where('session_id', '=', sessionId)
        .where('render_key', '=', key),
      'claim',
    );
  });
  return { statement, built };
}

const uncached = (conn: VaultConnection, sessionId: string, key: string, db = conn.db) =>
  conn.lock(
    db
      .selectFrom('session_renderings')
      .select(['render_key as key', 'value'])
      .where('session_id', '=', sessionId)
      .where('render_key', '=', key),
    'claim',
  );

for (const dialect of DIALECTS) {
  describe(`prepared statements (${dialect})`, () => {
    let store: FreshStore;
    const conns: VaultConnection[] = [];
    beforeEach(async () => {
      store = await freshStore(dialect);
    });
    afterEach(async () => {
      for (const c of conns.splice(0)) await c.destroy();
      await store.cleanup();
    });
    const open = async (): Promise<VaultConnection> => {
      const c = await connect(store);
      conns.push(c);
      return c;
    };

    it('compiles to the SQL kysely builds, with the arguments in place of the placeholders', async () => {
      const conn = await open();
      const { statement } = renderingStatement();
      for (const [s, k] of [
        ['s1', 'a'],
        ['s2', 'b'],
      ] as const) {
        const expected = uncached(conn, s, k).compile();
        const got = statement.compile(conn, s, k);
        expect(got.sql).toBe(expected.sql);
        expect(got.parameters).toEqual(expected.parameters);
      }
    });

    it('returns the rows the uncached query returns, inside and outside a transaction', async () => {
      const conn = await open();
      const { statement } = renderingStatement();
      const insert = prepared((c: VaultConnection, sessionId: string, key: string, value: string, now: string) =>
        c.db
          .insertInto('session_renderings')
          .values({ session_id: sessionId, render_key: key, value, updated_at: now }),
      );
      await conn.write(async (trx) => {
        await insert.execute(conn, trx, 's', 'k1', 'one', '2026-01-01T00:00:00.000Z');
        await insert.execute(conn, trx, 's', 'k2', 'two ɑβγ', '2026-01-01T00:00:00.000Z');
        const expected = await uncached(conn, 's', 'k2', trx).executeTakeFirst();
        expect(expected).toEqual({ key: 'k2', value: 'two ɑβγ' });
        expect(await statement.first(conn, trx, 's', 'k2')).toEqual(expected);
      });
      for (const key of ['k1', 'k2', 'missing']) {
        const expected = await uncached(conn, 's', key).execute();
        expect((await statement.execute(conn, conn.db, 's', key)).rows).toEqual(expected);
      }
      expect(await statement.first(conn, conn.db, 's', 'k1')).toEqual({ key: 'k1', value: 'one' });
      expect(await statement.first(conn, conn.db, 'other', 'k1')).toBeUndefined();
    });

    it('builds once per connection, and a second connection compiles its own', async () => {
      const a = await open();
      const b = await open();
      const { statement, built } = renderingStatement();
      statement.compile(a, 's', 'k');
      await statement.execute(a, a.db, 's', 'k');
      await statement.first(a, a.db, 't', 'j');
      expect(built).toHaveLength(1);
      await statement.first(b, b.db, 's', 'k');
      expect(built).toHaveLength(2);
      await a.destroy();
      conns.splice(conns.indexOf(a), 1);
      // The other connection's template is its own: it still runs once the first is gone.
      expect(await statement.first(b, b.db, 's', 'k')).toBeUndefined();
      expect(built).toHaveLength(2);
    });

    it('prepares each row count up to the bound once, builds longer ones anew, with the same rows either way', async () => {
      const conn = await open();
      const keys = Array.from({ length: PREPARED_ROWS_MAX + 4 }, (_, i) => `k${String(i).padStart(2, '0')}`);
      await conn.write(async (trx) => {
        for (const key of keys)
          await trx
            .insertInto('session_renderings')
            .values({ session_id: 's', render_key: key, value: `v ${key}`, updated_at: '2026-01-01T00:00:00.000Z' })
            .execute();
      });
      const builds: number[] = [];
      const statement = preparedRows(
        (c: VaultConnection, n: number, sessionId: string, ...wanted: readonly string[]) => {
          builds.push(n);
          return c.db
            .selectFrom('session_renderings')
            .select(['render_key as key', 'value'])
            .where('session_id', '=', sessionId)
            .where('render_key', 'in', wanted)
            .orderBy('render_key');
        },
        (n) => 1 + n,
      );
      const run = async (wanted: readonly string[]) =>
        (await statement.execute(conn, conn.db, wanted.length, 's', ...wanted)).rows.map((r) => r.key);
      const few = keys.slice(0, 3);
      const bound = keys.slice(0, PREPARED_ROWS_MAX);
      expect(await run(few)).toEqual(few);
      expect(await run(['k02', 'k00', 'missing'])).toEqual(['k00', 'k02']);
      expect(await run(bound)).toEqual(bound);
      expect(await run(bound)).toEqual(bound);
      expect(builds).toEqual([3, PREPARED_ROWS_MAX]);
      expect(await run(keys)).toEqual(keys);
      expect(await run([...keys].reverse())).toEqual(keys);
      expect(builds).toEqual([3, PREPARED_ROWS_MAX, keys.length, keys.length]);
    });

    it('refuses a builder that inspects an argument instead of binding it', async () => {
      const conn = await open();
      const statement = prepared((c: VaultConnection, sessionId: string, _unused: string) =>
        c.db.selectFrom('session_renderings').select('value').where('session_id', '=', sessionId),
      );
      expect(() => statement.compile(conn, 's', 'x')).toThrow(/not a parameter/);
    });
  });
}

describe('prepared statements across dialects', () => {
  let stores: Record<DialectName, FreshStore>;
  const conns: VaultConnection[] = [];
  beforeEach(async () => {
    stores = { sqlite: await freshStore('sqlite'), postgres: await freshStore('postgres') };
  });
  afterEach(async () => {
    for (const c of conns.splice(0)) await c.destroy();
    for (const s of Object.values(stores)) await s.cleanup();
  });

  it("one statement compiles each dialect's own SQL (placeholders, lock clause), in either order", async () => {
    for (const order of [DIALECTS, [...DIALECTS].reverse()]) {
      const { statement } = renderingStatement();
      const seen: Record<string, string> = {};
      for (const dialect of order) {
        const conn = await connect(stores[dialect]);
        conns.push(conn);
        seen[dialect] = statement.compile(conn, 's', 'k').sql;
        expect(seen[dialect]).toBe(uncached(conn, 's', 'k').compile().sql);
        expect((await statement.first(conn, conn.db, 's', 'k')) ?? null).toBeNull();
      }
      expect(seen['sqlite']).toMatch(/= \?/);
      expect(seen['sqlite']).not.toMatch(/for no key update/i);
      expect(seen['postgres']).toMatch(/= \$1/);
      expect(seen['postgres']).toMatch(/for no key update/i);
    }
  });
});
