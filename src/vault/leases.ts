/**
 * The lease port: inline exposures per (session, artifact, request), the delivery of receipts (pins)
 * and the sessions that hold them. Claims and deliveries row-lock the artifacts first, so exactly one
 * host wins the last inline slot and retention cannot prune an artifact being delivered. Every write
 * keeps the session alive; once retention released a session, its next delivery gets a new epoch, which
 * tells a process that memoized deliveries to make them again.
 */
import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import { ArtifactNotFoundError } from '../errors.js';
import { requireCount, sessionKey, type StoreContext } from './context.js';
import { idMatchesSha, isExactContent } from './identity.js';
import type { VaultConnection } from './dialect.js';
import type { Delivery, KnownContent, LeaseStore, SessionPins, StoreScope } from './ports.js';
import { prepared, preparedRows } from './prepared.js';
import type { VaultDatabase } from './schema.js';

/** Ids per locking select of a delivery. */
const DELIVER_BATCH = 200;

/** What a delivery verifies of the artifacts `ids`. */
const deliveryQuery = (conn: VaultConnection, ids: readonly string[]) =>
  conn.db
    .selectFrom('artifacts as a')
    .select(['a.artifact_id as artifactId', 'a.sha256 as sha256', 'a.content as content'])
    .where('a.artifact_id', 'in', ids);

/** Row-lock `n` artifacts and read what a delivery verifies: arguments (id₁, …, idₙ). */
const deliveryRows = preparedRows(
  (conn: VaultConnection, _n: number, ...ids: readonly string[]) => conn.lock(deliveryQuery(conn, ids), 'claim'),
  (n) => n,
);

/**
 * {@link deliveryRows} limited to what a tenant may read (any of its sessions observed or was
 * delivered it): arguments (tenant, id₁, …, idₙ). A delivery in a scope never hands a tenant
 * evidence it could not already read, whatever id a request named.
 */
const tenantDeliveryRows = preparedRows(
  (conn: VaultConnection, _n: number, tenant: string, ...ids: readonly string[]) =>
    conn.lock(
      deliveryQuery(conn, ids)
        // Correlated, so each id is checked through the access rows of that artifact
        // (access_by_artifact), not by listing everything the tenant may read.
        .where((eb) =>
          eb.exists(
            eb
              .selectFrom('artifact_access as x')
              .select('x.artifact_id')
              .whereRef('x.artifact_id', '=', 'a.artifact_id')
              .where('x.tenant', '=', tenant),
          ),
        ),
      'claim',
    ),
  (n) => 1 + n,
);

/** Pin `n` artifacts for a session: arguments (tenant, sessionId, now, id₁, …, idₙ). */
const pinUpsert = preparedRows(
  (conn: VaultConnection, _n: number, tenant: string, sessionId: string, now: string, ...ids: readonly string[]) =>
    conn.db
      .insertInto('artifact_access')
      .values(
        ids.map((artifactId) => ({
          tenant,
          session_id: sessionId,
          artifact_id: artifactId,
          pinned: 1,
          updated_at: now,
        })),
      )
      .onConflict((oc) =>
        oc.columns(['tenant', 'session_id', 'artifact_id']).doUpdateSet({ pinned: 1, updated_at: now }),
      ),
  (n) => 3 + n,
);

const sessionRow = prepared((conn: VaultConnection, tenant: string, sessionId: string) =>
  conn.db
    .selectFrom('vault_sessions')
    .select(['epoch', 'last_seen_at as lastSeen', 'closed'])
    .where('tenant', '=', tenant)
    .where('session_id', '=', sessionId),
);

/**
 * The session's row kept alive in one upsert, returning its epoch. On PostgreSQL it row-locks like an
 * update, so a concurrent release waits or skips; a row another host creates at once gives its epoch.
 */
const touchSessionRow = prepared(
  (conn: VaultConnection, tenant: string, sessionId: string, epoch: string, now: string) =>
    conn.db
      .insertInto('vault_sessions')
      .values({ tenant, session_id: sessionId, epoch, last_seen_at: now, closed: 0 })
      .onConflict((oc) =>
        oc.columns(['tenant', 'session_id']).doUpdateSet((eb) => ({
          last_seen_at: eb.ref('excluded.last_seen_at'),
          closed: eb.ref('excluded.closed'),
        })),
      )
      .returning('epoch'),
);

/** Keep the session's row alive inside a write transaction (a new epoch when missing); returns its epoch. */
export async function touchSession(
  ctx: StoreContext,
  trx: Kysely<VaultDatabase>,
  scope: StoreScope | undefined,
  sessionId?: string,
): Promise<string> {
  const key = sessionKey(ctx, scope, sessionId);
  const row = await touchSessionRow.first(ctx.conn, trx, key.tenant, key.sessionId!, randomUUID(), ctx.nowIso());
  if (row === undefined) throw new Error('touchSession: the upsert returned no row');
  return row.epoch;
}

type Db = Kysely<VaultDatabase>;

function exposureOf(db: Db, sessionId: string, artifactId: string, requestId: string) {
  return db
    .selectFrom('artifact_exposures')
    .select('inline')
    .where('session_id', '=', sessionId)
    .where('artifact_id', '=', artifactId)
    .where('request_id', '=', requestId);
}

function inlineCount(db: Db, sessionId: string, artifactId: string) {
  return db
    .selectFrom('artifact_exposures')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('session_id', '=', sessionId)
    .where('artifact_id', '=', artifactId)
    .where('inline', '=', 1);
}

/** Row-lock an artifact like a claim (retention cannot prune it before the commit); ArtifactNotFoundError when gone. */
export async function lockArtifact(conn: VaultConnection, trx: Db, artifactId: string): Promise<void> {
  const row = await conn
    .lock(trx.selectFrom('artifacts').select('seq').where('artifact_id', '=', artifactId), 'claim')
    .executeTakeFirst();
  if (row === undefined) throw new ArtifactNotFoundError(artifactId);
}

function exposureRow(ctx: StoreContext, sessionId: string, artifactId: string, requestId: string, inline: boolean) {
  return {
    session_id: sessionId,
    artifact_id: artifactId,
    request_id: requestId,
    inline: inline ? 1 : 0,
    exposed_at: ctx.nowIso(),
  };
}

/** The ids among `ids` whose rows the scope may read and that read back intact; row-locked for the rest of `trx`. */
async function intactIds(
  conn: VaultConnection,
  trx: Db,
  ids: readonly string[],
  tenant: string | undefined,
  known: ReadonlyMap<string, KnownContent> | undefined,
): Promise<Set<string>> {
  const intact = new Set<string>();
  for (let i = 0; i < ids.length; i += DELIVER_BATCH) {
    const batch = ids.slice(i, i + DELIVER_BATCH);
    // Locked for the rest of the transaction: retention skips these rows, and waits for nothing.
    const { rows } =
      tenant === undefined
        ? await deliveryRows.execute(conn, trx, batch.length, ...batch)
        : await tenantDeliveryRows.execute(conn, trx, batch.length, tenant, ...batch);
    for (const row of rows) {
      if (
        idMatchesSha(row.artifactId, row.sha256) &&
        isExactContent(conn.decodeContent(row.content), row.sha256, known?.get(row.artifactId))
      )
        intact.add(row.artifactId);
    }
  }
  return intact;
}

async function deliver(
  ctx: StoreContext,
  artifactIds: readonly string[],
  scope?: StoreScope,
  known?: ReadonlyMap<string, KnownContent>,
): Promise<Delivery> {
  const { conn } = ctx;
  const ids = [...new Set(artifactIds)];
  const key = sessionKey(ctx, scope);
  return conn.write(async (trx) => {
    const epoch = await touchSession(ctx, trx, scope);
    const now = ctx.nowIso();
    const intact = await intactIds(conn, trx, ids, scope === undefined ? undefined : key.tenant, known);
    const pinned = [...intact];
    for (let i = 0; i < pinned.length; i += DELIVER_BATCH) {
      const batch = pinned.slice(i, i + DELIVER_BATCH);
      await pinUpsert.execute(conn, trx, batch.length, key.tenant, key.sessionId!, now, ...batch);
    }
    return Object.freeze({ missing: Object.freeze(ids.filter((id) => !intact.has(id))), epoch });
  }, scope?.budget);
}

export function createLeaseStore(ctx: StoreContext): LeaseStore {
  const { conn } = ctx;
  const db = conn.db;
  return {
    async exposureAvailable(sessionId, artifactId, requestId, limit) {
      const max = requireCount('limit', limit);
      const existing = await exposureOf(db, sessionId, artifactId, requestId).executeTakeFirst();
      if (existing !== undefined) return Number(existing.inline) === 1;
      return Number((await inlineCount(db, sessionId, artifactId).executeTakeFirstOrThrow()).n) < max;
    },
    async claimExposure(sessionId, artifactId, requestId, limit, scope) {
      const max = requireCount('limit', limit);
      return conn.write(async (trx) => {
        await lockArtifact(conn, trx, artifactId);
        await touchSession(ctx, trx, scope, sessionId);
        const existing = await exposureOf(trx, sessionId, artifactId, requestId).executeTakeFirst();
        if (existing !== undefined) return Number(existing.inline) === 1;
        const count = await inlineCount(trx, sessionId, artifactId).executeTakeFirstOrThrow();
        if (Number(count.n) >= max) return false;
        await trx
          .insertInto('artifact_exposures')
          .values(exposureRow(ctx, sessionId, artifactId, requestId, true))
          .execute();
        return true;
      }, scope?.budget);
    },
    async recordExposure(sessionId, artifactId, requestId, inline, scope) {
      await conn.write(async (trx) => {
        await lockArtifact(conn, trx, artifactId);
        await touchSession(ctx, trx, scope, sessionId);
        await trx
          .insertInto('artifact_exposures')
          .values(exposureRow(ctx, sessionId, artifactId, requestId, inline))
          .onConflict((oc) =>
            oc.columns(['session_id', 'artifact_id', 'request_id']).doUpdateSet((eb) => ({
              inline: eb
                .case()
                .when('excluded.inline', '>', eb.ref('artifact_exposures.inline'))
                .then(eb.ref('excluded.inline'))
                .else(eb.ref('artifact_exposures.inline'))
                .end(),
              exposed_at: eb.ref('excluded.exposed_at'),
            })),
          )
          .execute();
      }, scope?.budget);
    },
    deliver: (artifactIds, scope, known) => deliver(ctx, artifactIds, scope, known),
    async pin(artifactIds, scope) {
      if ([...artifactIds].length === 0) return;
      await deliver(ctx, artifactIds, scope);
    },
    async sessionPins(scope): Promise<SessionPins | undefined> {
      const key = sessionKey(ctx, scope);
      const row = await sessionRow.first(conn, db, key.tenant, key.sessionId!);
      return row === undefined
        ? undefined
        : Object.freeze({ epoch: row.epoch, lastSeenMs: Date.parse(row.lastSeen), closed: Number(row.closed) === 1 });
    },
    async closeSession(scope) {
      const key = sessionKey(ctx, scope);
      await conn.write(
        (trx) =>
          trx
            .updateTable('vault_sessions')
            .set({ closed: 1 })
            .where('tenant', '=', key.tenant)
            .where('session_id', '=', key.sessionId!)
            .execute(),
        scope.budget,
      );
      ctx.room.fullUntil = 0; // the next put that needs room may release what this session held
    },
  };
}
