/** Queries more than one store file needs (the artifact summary, shared by reads and both searches). */
import type { Kysely } from 'kysely';
import type { StoreScope } from './ports.js';
import type { VaultDatabase } from './schema.js';
import type { ArtifactSummary } from './types.js';

/** `artifacts as a` with the summary columns (no content) and the observation count. */
export function selectSummaries(db: Kysely<VaultDatabase>) {
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

type SummaryRow = {
  artifactId: string;
  sha256: string;
  chars: number;
  bytes: number;
  toolName: string;
  createdAt: string;
  observationCount: number | string | bigint | null;
};

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
 * The ids of the artifacts a scope may read (a subquery): those its tenant's session observed or
 * was delivered (`artifact_access`); every session of the tenant when the scope names none. The
 * scope's names are already stored labels (see `storedScope`).
 */
export function accessibleIds(db: Kysely<VaultDatabase>, scope: StoreScope) {
  let q = db
    .selectFrom('artifact_access as x')
    .select('x.artifact_id')
    .where('x.tenant', '=', scope.tenant ?? '');
  if (scope.sessionId !== undefined) q = q.where('x.session_id', '=', scope.sessionId);
  return q;
}
