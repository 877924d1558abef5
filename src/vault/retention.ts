/**
 * High/low-water retention (docs/shared-vault.md), inside the write transaction that inserts a new
 * artifact after it locked the byte counter: a refusal rolls the pruning back too. Candidates are never
 * pinned, leased or a terminal baseline; short of the low water, what ended sessions held is released,
 * oldest first, and pruning runs again. On PostgreSQL candidates are locked `FOR UPDATE SKIP LOCKED` and
 * the DELETE re-checks the protections, so a pin committed after the candidate query still holds.
 */
import { expressionBuilder, type Expression, type Kysely, type SqlBool } from 'kysely';
import { VaultCapacityError } from '../errors.js';
import type { RoomBackoff } from './context.js';
import type { VaultConnection } from './dialect.js';
import { prepared } from './prepared.js';
import { META, type VaultDatabase } from './schema.js';

export interface Watermarks {
  readonly capacityBytes: number;
  readonly highWaterBytes: number;
  readonly lowWaterBytes: number;
}

/** high = max(1, cap × high%), low = cap × min(low%, high% − 1). */
export function watermarks(capacityBytes: number, highPct: number, lowPct: number): Watermarks {
  const low = Math.min(lowPct, highPct - 1);
  return Object.freeze({
    capacityBytes,
    highWaterBytes: Math.max(1, Math.floor((capacityBytes * highPct) / 100)),
    lowWaterBytes: Math.max(0, Math.floor((capacityBytes * low) / 100)),
  });
}

const BATCH = 64;
/** Sessions released per round before pruning again (oldest first). */
const RELEASE_BATCH = 16;

const counterAdd = prepared((conn: VaultConnection, key: string, delta: number) =>
  conn.db
    .updateTable('vault_meta')
    .set((eb) => ({ value: eb('value', '+', delta) }))
    .where('key', '=', key),
);

/** Add `delta` to a counter row (inside a write transaction on `conn`). */
export async function addCounter(
  conn: VaultConnection,
  trx: Kysely<VaultDatabase>,
  key: string,
  delta: number,
): Promise<void> {
  if (delta === 0) return;
  await counterAdd.execute(conn, trx, key, delta);
}

/**
 * No pin, exposure or terminal baseline holds the artifact whose id `artifactId` refers to: the
 * candidate query's filter, and the DELETE's re-check of it (a protection committed in between).
 */
function unprotected(artifactId: Expression<string>): Expression<SqlBool> {
  const eb = expressionBuilder<VaultDatabase>();
  return eb.and([
    eb.not(
      eb.exists(
        eb
          .selectFrom('artifact_access as p')
          .select('p.artifact_id')
          .where('p.artifact_id', '=', artifactId)
          .where('p.pinned', '=', 1),
      ),
    ),
    ...(['artifact_exposures', 'terminal_baselines'] as const).map((table) =>
      eb.not(eb.exists(eb.selectFrom(table).select('artifact_id').where('artifact_id', '=', artifactId))),
    ),
  ]);
}

/** Delete up to enough unprotected artifacts, least recently observed first, to bring `current` to `target`. */
async function pruneUnprotected(
  trx: Kysely<VaultDatabase>,
  conn: VaultConnection,
  current: number,
  target: number,
  pruned: { ids: string[]; bytes: number },
): Promise<number> {
  while (current > target) {
    const batch = await conn
      .lock(
        trx
          .selectFrom('artifacts as a')
          .select(['a.seq as seq', 'a.byte_count as bytes'])
          .where((eb) => unprotected(eb.ref('a.artifact_id')))
          .orderBy('a.last_observed_at')
          .orderBy('a.seq')
          .limit(BATCH),
        'delete',
        true,
      )
      .execute();
    if (batch.length === 0) break;
    const chosen: number[] = [];
    let left = current;
    for (const row of batch) {
      chosen.push(row.seq);
      left -= Number(row.bytes);
      if (left <= target) break;
    }
    const deleted = await trx
      .deleteFrom('artifacts')
      .where('seq', 'in', chosen)
      .where((eb) => unprotected(eb.ref('artifacts.artifact_id')))
      .returning(['seq', 'artifact_id as artifactId', 'byte_count as bytes'])
      .execute();
    if (deleted.length === 0) break;
    const seqs = deleted.map((d) => d.seq);
    await conn.search.removing(trx, seqs);
    for (const row of deleted) {
      current -= Number(row.bytes);
      pruned.bytes += Number(row.bytes);
      pruned.ids.push(row.artifactId);
    }
  }
  return current;
}

/**
 * Release what the oldest ended sessions (closed, or last seen before `idleBefore`) hold: their pins
 * (the access rows stay readable), their leases and sticky renderings (unless a live session of
 * another tenant uses the same id), and baselines unused since `idleBefore`. Returns how many
 * protections went (0: nothing left to release).
 */
async function releaseEnded(trx: Kysely<VaultDatabase>, conn: VaultConnection, policy: RoomPolicy): Promise<number> {
  const ended = await conn
    .lock(
      trx
        .selectFrom('vault_sessions')
        .select(['tenant', 'session_id as sessionId'])
        .where((eb) => eb.or([eb('closed', '=', 1), eb('last_seen_at', '<', policy.idleBefore)]))
        .orderBy('last_seen_at')
        .limit(RELEASE_BATCH),
      'delete',
      true,
    )
    .execute();
  for (const s of ended) {
    await trx
      .updateTable('artifact_access')
      .set({ pinned: 0 })
      .where('tenant', '=', s.tenant)
      .where('session_id', '=', s.sessionId)
      .where('pinned', '=', 1)
      .execute();
    await trx
      .deleteFrom('vault_sessions')
      .where('tenant', '=', s.tenant)
      .where('session_id', '=', s.sessionId)
      .execute();
    const shared = await trx
      .selectFrom('vault_sessions')
      .select('tenant')
      .where('session_id', '=', s.sessionId)
      .limit(1)
      .executeTakeFirst();
    if (shared === undefined) {
      await trx.deleteFrom('artifact_exposures').where('session_id', '=', s.sessionId).execute();
      await trx.deleteFrom('session_renderings').where('session_id', '=', s.sessionId).execute();
    }
  }
  if (ended.length > 0) await addCounter(conn, trx, META.releasedSessions, ended.length);
  const stale = await conn
    .lock(
      trx
        .selectFrom('terminal_baselines')
        .select('state_key')
        .where('updated_at', '<', policy.idleBefore)
        .orderBy('updated_at')
        .limit(BATCH),
      'delete',
      true,
    )
    .execute();
  const staleKeys = stale.map((b) => b.state_key);
  if (staleKeys.length > 0) await trx.deleteFrom('terminal_baselines').where('state_key', 'in', staleKeys).execute();
  return ended.length + stale.length;
}

/** How long (ms) a put refused for capacity spares the next puts that need room a retention pass. */
export const ROOM_BACKOFF_MS = 1000;

/** When and by whom retention runs: the release cutoff, the configured clock's now and the vault object's backoff. */
export interface RoomPolicy {
  /** ISO-8601 UTC: sessions last seen (and baselines last set) before it may be released. */
  readonly idleBefore: string;
  readonly now: number;
  readonly room: RoomBackoff;
}

/**
 * Make room for `incoming` bytes when `current` (the locked byte counter) plus it passes the high
 * water; returns the byte count after pruning, or throws VaultCapacityError (rolling the transaction back) when it
 * still does not fit. A pass ending in a refusal (a vault full of live sessions' evidence, scanned for
 * nothing) starts a {@link ROOM_BACKOFF_MS} backoff in this vault object; closing a session through it ends it.
 */
export async function makeRoom(
  trx: Kysely<VaultDatabase>,
  conn: VaultConnection,
  marks: Watermarks,
  current: number,
  incoming: number,
  policy: RoomPolicy,
): Promise<number> {
  const pruned = { ids: [] as string[], bytes: 0 };
  const pass = current + incoming > marks.highWaterBytes && policy.now >= policy.room.fullUntil;
  if (pass) {
    const target = Math.max(0, marks.lowWaterBytes - incoming);
    current = await pruneUnprotected(trx, conn, current, target, pruned);
    while (current > target && (await releaseEnded(trx, conn, policy)) > 0) {
      current = await pruneUnprotected(trx, conn, current, target, pruned);
    }
    if (pruned.ids.length > 0) {
      await addCounter(conn, trx, META.bytes, -pruned.bytes);
      await addCounter(conn, trx, META.count, -pruned.ids.length);
      await addCounter(conn, trx, META.prunedArtifacts, pruned.ids.length);
      await addCounter(conn, trx, META.prunedBytes, pruned.bytes);
    }
  }
  if (current + incoming > marks.capacityBytes) {
    if (pass) policy.room.fullUntil = policy.now + ROOM_BACKOFF_MS; // a refusal without a pass starts none
    throw new VaultCapacityError(
      `vault full: ${incoming} more bytes do not fit (${current} of ${marks.capacityBytes} bytes used by ` +
        'artifacts pinned or leased by live sessions, or baselines in use)',
    );
  }
  return current;
}
