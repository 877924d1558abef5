/**
 * Report figures from a vault's content-free metrics rows (what `stats` sums), one point per
 * recorded request in the order they were written. The vault holds no cache-prefix or fidelity
 * measurements, so those figures stay absent ("not measured"); `replay --json --series` has them.
 */
import { existsSync } from 'node:fs';
import Database from 'better-sqlite3';
import { reductionPct } from '../telemetry/stats.js';
import type { ReportInput, ReportSessionInput, RequestPointInput } from './figures.js';

interface Row {
  session_id: string;
  raw_chars: number;
  final_chars: number;
  raw_tokens: number | null;
  final_tokens: number | null;
  receipts: number;
  saved: string;
}

/** Read the figures of every request the vault at `path` recorded; an absent file or table yields none. */
export function readVaultFigures(path: string): ReportInput {
  const sessions = new Map<string, RequestPointInput[]>();
  if (path !== ':memory:' && existsSync(path)) {
    const db = new Database(path, { readonly: true, fileMustExist: true });
    try {
      db.pragma('busy_timeout = 5000');
      const hasTable = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'request_metrics'").get() !== undefined;
      const rows = hasTable
        ? (db
            .prepare(
              `SELECT session_id, raw_chars, final_chars, raw_tokens, final_tokens, receipts, saved_by_stage_json AS saved
               FROM request_metrics ORDER BY created_at, rowid`,
            )
            .iterate() as Iterable<Row>)
        : [];
      for (const r of rows) {
        const points = sessions.get(r.session_id) ?? [];
        sessions.set(r.session_id, points);
        points.push({
          raw_tokens: r.raw_tokens ?? 0,
          final_tokens: r.final_tokens ?? 0,
          raw_chars: r.raw_chars,
          final_chars: r.final_chars,
          receipts: r.receipts,
          saved_by_stage: numbers(r.saved),
        });
      }
    } finally {
      db.close();
    }
  }
  const perSession: ReportSessionInput[] = [...sessions].map(([id, points]) => ({ id, ...sums(points), per_request: points }));
  return { ...sums(perSession.flatMap((s) => s.per_request ?? [])), sessions: perSession };
}

interface Sums {
  requests: number;
  raw_tokens: number;
  final_tokens: number;
  reduction_pct: number;
  raw_chars: number;
  final_chars: number;
  receipts: number;
}

function sums(points: readonly RequestPointInput[]): Sums {
  const add = (f: (p: RequestPointInput) => number | undefined): number => points.reduce((n, p) => n + (f(p) ?? 0), 0);
  const raw = add((p) => p.raw_tokens);
  const final = add((p) => p.final_tokens);
  return {
    requests: points.length,
    raw_tokens: raw,
    final_tokens: final,
    reduction_pct: reductionPct(raw, final),
    raw_chars: add((p) => p.raw_chars),
    final_chars: add((p) => p.final_chars),
    receipts: add((p) => p.receipts),
  };
}

function numbers(json: string): Record<string, number> {
  const out: Record<string, number> = {};
  try {
    for (const [k, v] of Object.entries(JSON.parse(json) as Record<string, unknown>)) if (typeof v === 'number') out[k] = v;
  } catch {
    // A row another writer left malformed contributes no per-stage savings.
  }
  return out;
}
