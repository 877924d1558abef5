/**
 * Copy a whole vault from one store to another (a SQLite file into PostgreSQL, typically), then verify
 * every artifact by hash on the target. Artifacts get new row keys there (every other table refers to
 * them by id); rows the target already has are kept, so re-running is safe, and nothing is pruned.
 */
import type { Kysely } from 'kysely';
import type { VaultConnection } from './dialect.js';
import { openPostgresVault } from './dialect/postgres/postgres-vault.js';
import { openSqliteVault } from './dialect/sqlite/sqlite-vault.js';
import { isPostgresUrl } from './create.js';
import { idMatchesSha, sha256Hex } from './identity.js';
import { recountMeta, type VaultDatabase } from './schema.js';

export interface CopyReport {
  readonly artifacts: number;
  /** Artifacts the target already held (same content). */
  readonly alreadyThere: number;
  readonly bytes: number;
  /** Every artifact of the source found on the target with content hashing to its id and digest. */
  readonly verified: number;
  /** Ids that failed verification (empty on success). */
  readonly mismatches: readonly string[];
  /** Rows copied per table (beside artifacts). */
  readonly rows: Readonly<Record<string, number>>;
}

export interface CopyOptions {
  /** Lock wait on either side, ms. Default 10,000. */
  readonly busyTimeoutMs?: number;
  /** Called after each batch of artifacts with (copied so far, total). */
  readonly onProgress?: (done: number, total: number) => void;
}

const BATCH = 100;

/** Open a store by location (a path or a postgres:// URL) as a vault connection. */
async function openLocation(location: string, busyTimeoutMs: number): Promise<VaultConnection> {
  return isPostgresUrl(location)
    ? openPostgresVault({ url: location, busyTimeoutMs, poolSize: 4, statementTimeoutMs: 0 })
    : openSqliteVault({ path: location, busyTimeoutMs, indexInBackground: false });
}

/**
 * Copy every row of the vault at `from` into the vault at `to` and verify every artifact.
 *
 * @example
 * const report = await copyVault('~/.local/share/token-terminator/artifacts.sqlite3', 'postgres://tt@db/tt');
 * report.mismatches.length === 0;
 */
export async function copyVault(from: string, to: string, options: CopyOptions = {}): Promise<CopyReport> {
  const busyTimeoutMs = options.busyTimeoutMs ?? 10_000;
  const source = await openLocation(from, busyTimeoutMs);
  let target: VaultConnection | undefined;
  try {
    target = await openLocation(to, busyTimeoutMs);
    const { copied, alreadyThere, bytes } = await copyArtifacts(source, target, options);
    const rows = await copyTables(source, target);
    // The target's O(1) counters from its rows (the source's pruning history stays out of it).
    const t = target;
    await t.write((trx) => recountMeta(trx as Kysely<unknown>, (query) => t.lock(query, 'counter')));
    const { verified, mismatches } = await verifyCopy(source, target);
    return Object.freeze({
      artifacts: copied,
      alreadyThere,
      bytes,
      verified,
      mismatches: Object.freeze(mismatches),
      rows: Object.freeze(rows),
    });
  } finally {
    await target?.destroy();
    await source.destroy();
  }
}

/** The artifacts' rows in seq order, a batch at a time (`next` reads the batch after a seq). */
async function* inBatches<R extends { seq: number | bigint }>(next: (lastSeq: number) => Promise<R[]>) {
  for (let rows = await next(0); rows.length > 0; rows = await next(Number(rows[rows.length - 1]!.seq))) yield rows;
}

/** Copy the artifacts in batches of BATCH (seq order), indexing each new one for search on the target. */
async function copyArtifacts(
  source: VaultConnection,
  target: VaultConnection,
  options: CopyOptions,
): Promise<{ copied: number; alreadyThere: number; bytes: number }> {
  const src = source.db;
  const { n: total } = await src
    .selectFrom('artifacts')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirstOrThrow();
  let copied = 0;
  let alreadyThere = 0;
  let bytes = 0;
  for await (const rows of inBatches((lastSeq) =>
    src.selectFrom('artifacts').selectAll().where('seq', '>', lastSeq).orderBy('seq').limit(BATCH).execute(),
  )) {
    await target.write(async (trx) => {
      for (const row of rows) {
        const { seq: _, ...columns } = row;
        const content = source.decodeContent(row.content);
        const inserted = await trx
          .insertInto('artifacts')
          .values({ ...columns, tool_name: target.label(row.tool_name), content: target.encodeContent(content) })
          .onConflict((oc) => oc.doNothing())
          .returning('seq')
          .executeTakeFirst();
        if (inserted === undefined) alreadyThere++;
        else await target.search.added(trx, Number(inserted.seq), content);
        bytes += Number(row.byte_count);
      }
    });
    copied += rows.length;
    options.onProgress?.(copied, Number(total));
  }
  return { copied, alreadyThere, bytes };
}

/** Copy every other table (labels re-applied where the target's dialect bounds them); rows copied per table. */
async function copyTables(source: VaultConnection, target: VaultConnection): Promise<Record<string, number>> {
  const rowCounts: Record<string, number> = {};
  const label = (s: string) => target.label(s);
  /** One table's rows, read whole, written in batches of BATCH (rows the target has are kept). */
  const copyTable = async <T extends Record<string, unknown>>(
    name: keyof VaultDatabase,
    read: (db: Kysely<VaultDatabase>) => Promise<T[]>,
    relabel: (row: T) => T = (row) => row,
  ): Promise<void> => {
    const all = await read(source.db);
    for (let i = 0; i < all.length; i += BATCH) {
      const batch = all.slice(i, i + BATCH).map(relabel);
      await target.write((trx) =>
        trx
          .insertInto(name)
          .values(batch as never)
          .onConflict((oc) => oc.doNothing())
          .execute(),
      );
    }
    rowCounts[name] = all.length;
  };
  await copyTable(
    'artifact_observations',
    (db) =>
      db
        .selectFrom('artifact_observations')
        .select(['artifact_id', 'session_id', 'tool_call_id', 'tool_name', 'args_json', 'args_sha256', 'observed_at'])
        .orderBy('id')
        .execute(),
    (r) => ({
      ...r,
      session_id: label(r.session_id),
      tool_call_id: label(r.tool_call_id),
      tool_name: label(r.tool_name),
    }),
  );
  await copyTable(
    'artifact_tools',
    (db) => db.selectFrom('artifact_tools').selectAll().execute(),
    (r) => ({ ...r, tool_name: label(r.tool_name), tool_fold: label(r.tool_fold) }),
  );
  for (const table of PLAIN_TABLES)
    await copyTable(table, (db) => db.selectFrom(table).selectAll().execute() as Promise<Record<string, unknown>[]>);
  await copyTable('working_state_events', (db) =>
    db
      .selectFrom('working_state_events')
      .select(['event_id', 'session_id', 'payload', 'created_at'])
      .orderBy('seq')
      .execute(),
  );
  return rowCounts;
}

/** Tables copied row for row, in this order. */
const PLAIN_TABLES = [
  'artifact_access',
  'vault_sessions',
  'artifact_exposures',
  'terminal_baselines',
  'session_renderings',
  'request_metrics',
  'request_component_metrics',
  'working_state_entities',
  'token_counts',
] as const;

/** Verify every source artifact on the target: same digest, content hashing to it and to the id. */
async function verifyCopy(
  source: VaultConnection,
  target: VaultConnection,
): Promise<{ verified: number; mismatches: string[] }> {
  const mismatches: string[] = [];
  let verified = 0;
  for await (const rows of inBatches((lastSeq) =>
    source.db
      .selectFrom('artifacts')
      .select(['seq', 'artifact_id', 'sha256'])
      .where('seq', '>', lastSeq)
      .orderBy('seq')
      .limit(BATCH)
      .execute(),
  )) {
    for (const row of rows) {
      const there = await target.db
        .selectFrom('artifacts')
        .select(['sha256', 'content'])
        .where('artifact_id', '=', row.artifact_id)
        .executeTakeFirst();
      const ok =
        there !== undefined &&
        there.sha256 === row.sha256 &&
        sha256Hex(target.decodeContent(there.content)) === row.sha256 &&
        idMatchesSha(row.artifact_id, row.sha256);
      if (ok) verified++;
      else mismatches.push(row.artifact_id);
    }
  }
  return { verified, mismatches };
}
