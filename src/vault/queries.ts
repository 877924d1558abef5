/** Queries more than one store file needs (the artifact summary, shared by reads and both searches). */
import { sql, type Expression, type Kysely, type SqlBool } from 'kysely';
import { sessionStateKey } from '../step.js';

/** The first character of every keyed tenant's {@link sessionStateKey}. */
const STATE_KEY_MARK = sessionStateKey({ tenant: 'x', sessionId: '' }).slice(0, 1);
import type { StoreScope } from './ports.js';
import type { VaultDatabase } from './schema.js';
import type { ArtifactSummary } from './types.js';

/**
 * Whether an observation row (`o`) is one `tenant` made: its session id, a
 * {@link sessionStateKey}, starts with the tenant's prefix (the local tenant's with anything but
 * the mark).
 */
export function observedBy(tenant: string) {
  if (tenant === '') return sql<boolean>`substr(o.session_id, 1, 1) <> ${STATE_KEY_MARK}`;
  const prefix = sessionStateKey({ tenant, sessionId: '' });
  return sql<boolean>`substr(o.session_id, 1, ${sql.lit([...prefix].length)}) = ${prefix}`;
}

/**
 * The ids of the artifacts with a case-folded tool name that `matches`: any name, or given a scope
 * only the names its own tenant observed, never those another gave the same bytes.
 */
export function toolMatches(
  db: Kysely<VaultDatabase>,
  scope: StoreScope | undefined,
  matches: (folded: Expression<string>) => Expression<SqlBool>,
) {
  if (scope === undefined)
    return db
      .selectFrom('artifact_tools as t')
      .select('t.artifact_id')
      .where((eb) => matches(eb.ref('t.tool_fold')));
  return db
    .selectFrom('artifact_observations as o')
    .select('o.artifact_id')
    .where(observedBy(scope.tenant ?? ''))
    .where(matches(sql<string>`lower(o.tool_name)`));
}

/** The observations of `a` (the outer artifact) one tenant made (see {@link observedBy}). */
function observationsOf(db: Kysely<VaultDatabase>, tenant: string) {
  return db
    .selectFrom('artifact_observations as o')
    .where('o.artifact_id', '=', sql<string>`a.artifact_id`)
    .where(observedBy(tenant));
}

/**
 * `artifacts as a` with the summary columns (no content) and observation count. Given a scope, they
 * are its tenant's own (tool name, first sighting, count), so no tenant learns if, when or as what
 * another stored the same bytes.
 */
export function selectSummaries(db: Kysely<VaultDatabase>, scope?: StoreScope) {
  if (scope !== undefined) {
    const tenant = scope.tenant ?? '';
    const firstAccess = db
      .selectFrom('artifact_access as x')
      .where('x.artifact_id', '=', sql<string>`a.artifact_id`)
      .where('x.tenant', '=', tenant)
      .select((x) => x.fn.min<string>('x.updated_at').as('t'));
    return db.selectFrom('artifacts as a').select((eb) => [
      'a.artifact_id as artifactId',
      'a.sha256 as sha256',
      'a.char_count as chars',
      'a.byte_count as bytes',
      eb.fn
        .coalesce(
          observationsOf(db, tenant).select('o.tool_name').orderBy('o.observed_at').orderBy('o.id').limit(1),
          eb.val(''),
        )
        .$castTo<string>()
        .as('toolName'),
      eb.fn
        .coalesce(
          observationsOf(db, tenant).select((o) => o.fn.min<string>('o.observed_at').as('t')),
          firstAccess,
        )
        .$castTo<string>()
        .as('createdAt'),
      observationsOf(db, tenant)
        .select((o) => o.fn.countAll<number>().as('n'))
        .as('observationCount'),
    ]);
  }
  return db.selectFrom('artifacts as a').select((eb) => [
    'a.artifact_id as artifactId',
    'a.sha256 as sha256',
    'a.char_count as chars',
    'a.byte_count as bytes',
    'a.tool_name as toolName',
    'a.created_at as createdAt',
    eb
      .selectFrom('artifact_observations as o')
      .whereRef('o.artifact_id', '=', 'a.artifact_id')
      .select((o) => o.fn.countAll<number>().as('n'))
      .as('observationCount'),
  ]);
}

type SummaryRow = Omit<ArtifactSummary, 'observationCount'> & { observationCount: number | string | bigint | null };

/** A frozen summary with plain numbers (drivers may return counts as bigint or string). */
export function toSummary(row: SummaryRow): ArtifactSummary {
  return Object.freeze({
    artifactId: row.artifactId,
    sha256: row.sha256,
    chars: Number(row.chars),
    bytes: Number(row.bytes),
    toolName: row.toolName,
    createdAt: row.createdAt,
    observationCount: Number(row.observationCount ?? 0),
  });
}

/**
 * The ids of the artifacts a scope may read (subquery over `artifact_access`; every session of the
 * tenant when it names none). Its names are already stored labels (`storedScope`).
 */
export function accessibleIds(db: Kysely<VaultDatabase>, scope: StoreScope) {
  let q = db
    .selectFrom('artifact_access as x')
    .select('x.artifact_id')
    .where('x.tenant', '=', scope.tenant ?? '');
  if (scope.sessionId !== undefined) q = q.where('x.session_id', '=', scope.sessionId);
  return q;
}
