/**
 * The count store (see {@link CountStore}): a process meeting a conversation for the first time (a
 * restarted or second gateway, an evicted session) reads a row per large item instead of tokenizing its
 * history again. A count never changes for its (counter, digest): rows are only completed, never
 * changed, and deleted {@link COUNT_TTL_MS} after they were first written.
 */
import { sql } from 'kysely';
import type { StoreContext } from './context.js';
import { VaultArgumentError } from './errors.js';
import {
  STORED_COUNT_FIELDS,
  type CountRow,
  type CountStore,
  type StoredCountField,
  type StoredCounts,
} from './ports.js';

/** Rows are deleted this long after they were first written (30 days). */
export const COUNT_TTL_MS = 30 * 24 * 3600 * 1000;
/** Old rows are deleted at most this often per process, inside a write that adds rows. */
const PRUNE_EVERY_MS = 3600 * 1000;
/** Digests per read and rows per insert statement (well under both dialects' parameter limits). */
const CHUNK = 400;
const COUNTER_MAX = 200;
/** A SHA-256 digest in base64 (with padding), as src/ledger/item-measures.ts computes it. */
const DIGEST = /^[A-Za-z0-9+/]{43}=$/;

/** The table column of a count (migration 0004 names them so). */
const column = <F extends StoredCountField>(f: F): `${F}_tokens` => `${f}_tokens`;
type Column = `${StoredCountField}_tokens`;

function requireCounter(counter: unknown): string {
  if (typeof counter !== 'string' || counter.length === 0 || counter.length > COUNTER_MAX)
    throw new VaultArgumentError(`token counts: counter must be a label of 1–${COUNTER_MAX} characters`);
  return counter;
}

function requireDigest(hash: unknown): string {
  if (typeof hash !== 'string' || !DIGEST.test(hash))
    throw new VaultArgumentError('token counts: hash must be a base64 SHA-256 digest');
  return hash;
}

function requireTokens(name: string, n: unknown): number | null {
  if (n === undefined) return null;
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0)
    throw new VaultArgumentError(`token counts: ${name} must be an integer ≥ 0 (got ${String(n)})`);
  return n;
}

type Db = StoreContext['conn']['db'];
type MergedRow = { -readonly [K in keyof CountRow]: CountRow[K] };

/** The stored counts of `wanted` digests under counter `key`, by digest. */
async function readCounts(db: Db, key: string, wanted: readonly string[]): Promise<Map<string, StoredCounts>> {
  const found = new Map<string, StoredCounts>();
  for (let i = 0; i < wanted.length; i += CHUNK) {
    const rows = await db
      .selectFrom('token_counts')
      .select(['sha256', ...STORED_COUNT_FIELDS.map(column)])
      .where('counter', '=', key)
      .where('sha256', 'in', wanted.slice(i, i + CHUNK))
      .execute();
    for (const row of rows) {
      const known = STORED_COUNT_FIELDS.filter((f) => row[column(f)] !== null && row[column(f)] !== undefined);
      // Drivers may hand integers back as strings or bigints.
      found.set(row.sha256, Object.fromEntries(known.map((f) => [f, Number(row[column(f)])])));
    }
  }
  return found;
}

/** The given rows checked, one per digest: a digest given twice keeps every count either gave. */
function mergeRows(given: readonly CountRow[]): Map<string, MergedRow> {
  const merged = new Map<string, MergedRow>();
  for (const row of given) {
    const hash = requireDigest(row?.hash);
    const into = merged.get(hash) ?? { hash };
    for (const f of STORED_COUNT_FIELDS) {
      const n = requireTokens(f, row[f]);
      if (n !== null && into[f] === undefined) into[f] = n;
    }
    merged.set(hash, into);
  }
  return merged;
}

/** The table rows of the merged counts, written at `now`. */
function tableRows(key: string, merged: ReadonlyMap<string, MergedRow>, now: string) {
  return [...merged.values()].map((r) => ({
    counter: key,
    sha256: r.hash,
    ...(Object.fromEntries(STORED_COUNT_FIELDS.map((f) => [column(f), r[f] ?? null])) as Record<Column, number | null>),
    created_at: now,
  }));
}

/** Insert the rows (a stored count stays; only a count a row lacked is filled in), and delete expired rows when `prune`. */
async function writeRows(ctx: StoreContext, rows: ReturnType<typeof tableRows>, prune: boolean): Promise<void> {
  await ctx.conn.write(async (trx) => {
    for (let i = 0; i < rows.length; i += CHUNK) {
      await trx
        .insertInto('token_counts')
        .values(rows.slice(i, i + CHUNK))
        .onConflict((oc) =>
          oc.columns(['counter', 'sha256']).doUpdateSet((eb) => {
            const fill = (c: Column) =>
              eb.fn.coalesce(sql.ref<number | null>(`token_counts.${c}`), eb.ref(`excluded.${c}`));
            return Object.fromEntries(STORED_COUNT_FIELDS.map((f) => [column(f), fill(column(f))])) as Record<
              Column,
              ReturnType<typeof fill>
            >;
          }),
        )
        .execute();
    }
    if (prune)
      await trx
        .deleteFrom('token_counts')
        .where('created_at', '<', new Date(ctx.clock() - COUNT_TTL_MS).toISOString())
        .execute();
  });
}

export function createCountStore(ctx: StoreContext): CountStore {
  let prunedAt = Number.NEGATIVE_INFINITY;
  return {
    async tokenCounts(counter, hashes) {
      const key = requireCounter(counter);
      return readCounts(ctx.conn.db, key, [...new Set(hashes.map(requireDigest))]);
    },
    async recordTokenCounts(counter, given) {
      const key = requireCounter(counter);
      const merged = mergeRows(given);
      if (merged.size === 0) return;
      const rows = tableRows(key, merged, ctx.nowIso());
      const prune = ctx.clock() - prunedAt >= PRUNE_EVERY_MS;
      await writeRows(ctx, rows, prune);
      if (prune) prunedAt = ctx.clock();
    },
  };
}
