/**
 * The session-state port: terminal baselines, sticky renderings and the working-state graph,
 * so that any process (or host) can continue a session another one started.
 */
import type { StoreContext } from './context.js';
import type { VaultConnection } from './dialect.js';
import { lockArtifact, touchSession } from './leases.js';
import type { SessionStore } from './ports.js';
import { prepared, preparedRows } from './prepared.js';
import { createWorkingState, type WorkingStateLimits } from './working-state.js';

/** Rows per upsert statement: 4 parameters each, far below either dialect's limit on parameters. */
const RENDERINGS_PER_STATEMENT = 200;

/** The upsert of `n` renderings of one session: arguments (sessionId, now, key₁, value₁, …). */
const renderingsUpsert = preparedRows(
  (conn: VaultConnection, n: number, ...args: readonly string[]) =>
    conn.db
      .insertInto('session_renderings')
      .values(
        Array.from({ length: n }, (_, i) => ({
          session_id: args[0]!,
          render_key: args[2 + 2 * i]!,
          value: args[3 + 2 * i]!,
          updated_at: args[1]!,
        })),
      )
      .onConflict((oc) =>
        oc.columns(['session_id', 'render_key']).doUpdateSet((eb) => ({
          value: eb.ref('excluded.value'),
          updated_at: eb.ref('excluded.updated_at'),
        })),
      ),
  (n) => 2 + 2 * n,
);

const renderingOf = prepared((conn: VaultConnection, sessionId: string, key: string) =>
  conn.db
    .selectFrom('session_renderings')
    .select('value')
    .where('session_id', '=', sessionId)
    .where('render_key', '=', key),
);

export function createSessionStore(ctx: StoreContext, workingStateLimits: WorkingStateLimits): SessionStore {
  const { conn } = ctx;
  const db = conn.db;
  /** Upsert distinct keys of one session in one write transaction, with one touch of the session. */
  const writeRenderings = (...[sessionId, entries, scope]: Parameters<SessionStore['setRenderings']>): Promise<void> =>
    conn.write(async (trx) => {
      // Renderings live as long as their session: the row makes retention release them with it.
      await touchSession(ctx, trx, scope, sessionId);
      const now = ctx.nowIso();
      for (let i = 0; i < entries.length; i += RENDERINGS_PER_STATEMENT) {
        const part = entries.slice(i, i + RENDERINGS_PER_STATEMENT);
        await renderingsUpsert.execute(conn, trx, part.length, sessionId, now, ...part.flat());
      }
    }, scope?.budget);
  return {
    async getBaseline(stateKey) {
      const row = await db
        .selectFrom('terminal_baselines')
        .select(['state_key as stateKey', 'artifact_id as artifactId', 'updated_at as updatedAt'])
        .where('state_key', '=', stateKey)
        .executeTakeFirst();
      return row === undefined ? undefined : Object.freeze(row);
    },

    async setBaseline(stateKey, artifactId, scope) {
      await conn.write(async (trx) => {
        await lockArtifact(conn, trx, artifactId);
        await trx
          .insertInto('terminal_baselines')
          .values({ state_key: stateKey, artifact_id: artifactId, updated_at: ctx.nowIso() })
          .onConflict((oc) =>
            oc.column('state_key').doUpdateSet((eb) => ({
              artifact_id: eb.ref('excluded.artifact_id'),
              updated_at: eb.ref('excluded.updated_at'),
            })),
          )
          .execute();
      }, scope?.budget);
    },

    async getRendering(sessionId, key) {
      return (await renderingOf.first(conn, db, sessionId, key))?.value;
    },

    setRendering: (sessionId, key, value, scope) => writeRenderings(sessionId, [[key, value]], scope),

    async setRenderings(sessionId, entries, scope) {
      if (entries.length === 0) return;
      // A key given twice keeps its later value, as calling setRendering in order would; one
      // PostgreSQL upsert must not name a row twice either.
      await writeRenderings(sessionId, [...new Map(entries.map(([k, v]) => [k, v] as const))], scope);
    },

    workingState: createWorkingState(ctx, workingStateLimits),
  };
}
