/**
 * High/low-water retention. Runs inside the write transaction that inserts a new artifact, after
 * that transaction locked the byte counter, so a refusal (still over capacity after pruning) rolls
 * the pruning back too: nothing is written.
 *
 * Candidates are never pinned (named by a delivered receipt), leased or a terminal baseline. On
 * PostgreSQL they are locked `FOR UPDATE SKIP LOCKED` (a row another host is claiming, pinning or
 * referencing is skipped rather than waited for), and the DELETE re-checks the protections, so a
 * pin committed after the candidate query started still saves its artifact.
 */
import type { Kysely } from 'kysely';
import { VaultCapacityError } from '../errors.js';
import type { VaultConnection } from './dialect.js';
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

/** Add `delta` to a counter row (inside a write transaction). */
export async function addCounter(trx: Kysely<VaultDatabase>, key: string, delta: number): Promise<void> {
  if (delta === 0) return;
  await trx
    .updateTable('vault_meta')
    .set((eb) => ({ value: eb('value', '+', delta) }))
    .where('key', '=', key)
    .execute();
}

/**
 * Make room for `incoming` bytes when `current` (the locked byte counter) plus it passes the high
 * water. Returns the ids it pruned (for diagnostics and tests). Throws VaultCapacityError (the
 * caller's transaction then rolls back) when the artifact still does not fit under the capacity.
 */
export async function makeRoom(trx: Kysely<VaultDatabase>, conn: VaultConnection, marks: Watermarks, current: number, incoming: number): Promise<string[]> {
  const pruned: string[] = [];
  if (current + incoming > marks.highWaterBytes) {
    const target = Math.max(0, marks.lowWaterBytes - incoming);
    let prunedBytes = 0;
    while (current > target) {
      const batch = await conn
        .lock(
          trx
            .selectFrom('artifacts as a')
            .select(['a.seq as seq', 'a.byte_count as bytes'])
            .where((eb) => eb.not(eb.exists(eb.selectFrom('artifact_pins as p').select('p.artifact_id').whereRef('p.artifact_id', '=', 'a.artifact_id'))))
            .where((eb) => eb.not(eb.exists(eb.selectFrom('artifact_exposures as e').select('e.artifact_id').whereRef('e.artifact_id', '=', 'a.artifact_id'))))
            .where((eb) => eb.not(eb.exists(eb.selectFrom('terminal_baselines as b').select('b.artifact_id').whereRef('b.artifact_id', '=', 'a.artifact_id'))))
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
        .where((eb) => eb.not(eb.exists(eb.selectFrom('artifact_pins as p').select('p.artifact_id').whereRef('p.artifact_id', '=', 'artifacts.artifact_id'))))
        .where((eb) => eb.not(eb.exists(eb.selectFrom('artifact_exposures as e').select('e.artifact_id').whereRef('e.artifact_id', '=', 'artifacts.artifact_id'))))
        .where((eb) => eb.not(eb.exists(eb.selectFrom('terminal_baselines as b').select('b.artifact_id').whereRef('b.artifact_id', '=', 'artifacts.artifact_id'))))
        .returning(['seq', 'artifact_id as artifactId', 'byte_count as bytes'])
        .execute();
      if (deleted.length === 0) break;
      await conn.search.removing(trx, deleted.map((d) => d.seq));
      for (const row of deleted) {
        current -= Number(row.bytes);
        prunedBytes += Number(row.bytes);
        pruned.push(row.artifactId);
      }
    }
    if (pruned.length > 0) {
      await addCounter(trx, META.bytes, -prunedBytes);
      await addCounter(trx, META.count, -pruned.length);
      await addCounter(trx, META.prunedArtifacts, pruned.length);
      await addCounter(trx, META.prunedBytes, prunedBytes);
    }
  }
  if (current + incoming > marks.capacityBytes) {
    throw new VaultCapacityError(
      `vault full: ${incoming} more bytes do not fit (${current} of ${marks.capacityBytes} bytes used by ` +
        'pinned, leased or baseline artifacts)',
    );
  }
  return pruned;
}
