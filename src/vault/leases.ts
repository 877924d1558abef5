/**
 * The lease port: inline exposures per (session, artifact, request) and pins. A claim is one
 * write transaction that row-locks the artifact first (FOR NO KEY UPDATE on PostgreSQL; the file
 * lock on SQLite), so of many processes or hosts racing for the last inline slot exactly one wins,
 * and retention (which skips locked rows) cannot prune the artifact mid-claim.
 */
import { ArtifactNotFoundError } from '../errors.js';
import { requireCount, type StoreContext } from './context.js';
import type { LeaseStore } from './ports.js';

export function createLeaseStore(ctx: StoreContext): LeaseStore {
  const { conn } = ctx;
  const db = conn.db;

  const exposureOf = (sessionId: string, artifactId: string, requestId: string) =>
    db
      .selectFrom('artifact_exposures')
      .select('inline')
      .where('session_id', '=', sessionId)
      .where('artifact_id', '=', artifactId)
      .where('request_id', '=', requestId);
  const inlineCount = (sessionId: string, artifactId: string) =>
    db
      .selectFrom('artifact_exposures')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('session_id', '=', sessionId)
      .where('artifact_id', '=', artifactId)
      .where('inline', '=', 1);
  const exists = async (artifactId: string): Promise<boolean> =>
    (await db.selectFrom('artifacts').select('seq').where('artifact_id', '=', artifactId).executeTakeFirst()) !== undefined;

  return {
    async exposureAvailable(sessionId, artifactId, requestId, limit) {
      ctx.assertOpen();
      const max = requireCount('limit', limit);
      const existing = await exposureOf(sessionId, artifactId, requestId).executeTakeFirst();
      if (existing !== undefined) return Number(existing.inline) === 1;
      return Number((await inlineCount(sessionId, artifactId).executeTakeFirstOrThrow()).n) < max;
    },

    async claimExposure(sessionId, artifactId, requestId, limit) {
      ctx.assertOpen();
      const max = requireCount('limit', limit);
      return conn.write(async (trx) => {
        const row = await conn.lock(trx.selectFrom('artifacts').select('seq').where('artifact_id', '=', artifactId), 'claim').executeTakeFirst();
        if (row === undefined) throw new ArtifactNotFoundError(artifactId);
        const existing = await trx
          .selectFrom('artifact_exposures')
          .select('inline')
          .where('session_id', '=', sessionId)
          .where('artifact_id', '=', artifactId)
          .where('request_id', '=', requestId)
          .executeTakeFirst();
        if (existing !== undefined) return Number(existing.inline) === 1;
        const count = await trx
          .selectFrom('artifact_exposures')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('session_id', '=', sessionId)
          .where('artifact_id', '=', artifactId)
          .where('inline', '=', 1)
          .executeTakeFirstOrThrow();
        if (Number(count.n) >= max) return false;
        await trx
          .insertInto('artifact_exposures')
          .values({ session_id: sessionId, artifact_id: artifactId, request_id: requestId, inline: 1, exposed_at: ctx.nowIso() })
          .execute();
        return true;
      });
    },

    async recordExposure(sessionId, artifactId, requestId, inline) {
      ctx.assertOpen();
      if (!(await exists(artifactId))) throw new ArtifactNotFoundError(artifactId);
      await db
        .insertInto('artifact_exposures')
        .values({ session_id: sessionId, artifact_id: artifactId, request_id: requestId, inline: inline ? 1 : 0, exposed_at: ctx.nowIso() })
        .onConflict((oc) =>
          oc.columns(['session_id', 'artifact_id', 'request_id']).doUpdateSet((eb) => ({
            inline: eb.case().when('excluded.inline', '>', eb.ref('artifact_exposures.inline')).then(eb.ref('excluded.inline')).else(eb.ref('artifact_exposures.inline')).end(),
            exposed_at: eb.ref('excluded.exposed_at'),
          })),
        )
        .execute();
    },

    async pin(artifactIds) {
      ctx.assertOpen();
      const ids = [...new Set(artifactIds)];
      if (ids.length === 0) return;
      const now = ctx.nowIso();
      // Only ids that exist are pinned (a pruned one is silently skipped: callers verify after pinning).
      await conn.write((trx) =>
        trx
          .insertInto('artifact_pins')
          .columns(['artifact_id', 'pinned_at'])
          .expression((eb) => eb.selectFrom('artifacts').select((s) => ['artifact_id', s.cast<string>(s.val(now), 'text').as('pinned_at')]).where('artifact_id', 'in', ids))
          .onConflict((oc) => oc.doNothing())
          .execute(),
      );
    },
  };
}
