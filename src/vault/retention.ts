/**
 * High/low-water retention. Runs inside the write transaction that inserts a new artifact, so a
 * refusal (still over capacity after pruning) rolls the pruning back too: nothing is written.
 */
import type Database from 'better-sqlite3';
import { VaultCapacityError } from '../errors.js';
import { META } from './schema.js';

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

export interface RetentionStatements {
  readonly meta: Database.Statement;
  readonly addMeta: Database.Statement;
  readonly candidates: Database.Statement;
  readonly deleteFts: Database.Statement;
  readonly deleteArtifact: Database.Statement;
}

/** Prepared statements for retention, bound to one connection. */
export function retentionStatements(raw: Database.Database): RetentionStatements {
  return {
    meta: raw.prepare('SELECT value FROM vault_meta WHERE key = ?').pluck(),
    addMeta: raw.prepare('UPDATE vault_meta SET value = value + ? WHERE key = ?'),
    // Never a candidate: pinned (named by a delivered receipt), leased, or a terminal baseline.
    candidates: raw.prepare(
      `SELECT seq, artifact_id AS artifactId, byte_count AS bytes FROM artifacts a
       WHERE NOT EXISTS (SELECT 1 FROM artifact_pins p WHERE p.artifact_id = a.artifact_id)
         AND NOT EXISTS (SELECT 1 FROM artifact_exposures e WHERE e.artifact_id = a.artifact_id)
         AND NOT EXISTS (SELECT 1 FROM terminal_baselines b WHERE b.artifact_id = a.artifact_id)
       ORDER BY last_observed_at, seq LIMIT ${BATCH}`,
    ),
    deleteFts: raw.prepare('DELETE FROM artifact_fts WHERE rowid = ?'),
    deleteArtifact: raw.prepare('DELETE FROM artifacts WHERE seq = ?'),
  };
}

/**
 * Make room for `incoming` bytes. Returns the ids it pruned (for diagnostics and tests). Throws VaultCapacityError (the caller's
 * transaction then rolls back) when the artifact still does not fit under the capacity.
 */
export function makeRoom(st: RetentionStatements, marks: Watermarks, incoming: number): string[] {
  let current = Number(st.meta.get(META.bytes) ?? 0);
  const pruned: string[] = [];
  if (current + incoming > marks.highWaterBytes) {
    const target = Math.max(0, marks.lowWaterBytes - incoming);
    let prunedBytes = 0;
    while (current > target) {
      const batch = st.candidates.all() as { seq: number; artifactId: string; bytes: number }[];
      if (batch.length === 0) break;
      for (const row of batch) {
        st.deleteFts.run(row.seq);
        st.deleteArtifact.run(row.seq);
        current -= row.bytes;
        prunedBytes += row.bytes;
        pruned.push(row.artifactId);
        if (current <= target) break;
      }
    }
    if (pruned.length > 0) {
      st.addMeta.run(-prunedBytes, META.bytes);
      st.addMeta.run(-pruned.length, META.count);
      st.addMeta.run(pruned.length, META.prunedArtifacts);
      st.addMeta.run(prunedBytes, META.prunedBytes);
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
