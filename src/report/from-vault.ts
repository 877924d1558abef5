/**
 * Report figures from a vault's content-free metrics rows (what `stats` sums), one point per
 * recorded request in the order they were written. The vault holds no cache-prefix or fidelity
 * measurements, so those figures stay absent ("not measured"); `replay --json --series` has them.
 */
import { existsSync } from 'node:fs';
import Database from 'better-sqlite3';
import { parseSessionStateKey } from '../step.js';
import { reductionPct } from '../vault/metrics.js';
import type { MetricsStore } from '../vault/ports.js';
import type { RequestMetricRow } from '../vault/types.js';
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

/**
 * Read the figures of every request the SQLite vault at `path` recorded, read-only (`report --db`: it
 * never creates or migrates a file); an absent file or table yields none.
 *
 * @example
 * const figures = readVaultFigures('artifacts.sqlite3');
 */
export function readVaultFigures(path: string): ReportInput {
  const rows: RequestMetricRow[] = [];
  if (path !== ':memory:' && existsSync(path)) {
    const db = new Database(path, { readonly: true, fileMustExist: true });
    try {
      db.pragma('busy_timeout = 5000');
      const hasTable =
        db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'request_metrics'").get() !== undefined;
      const found = hasTable
        ? (db
            .prepare(
              `SELECT session_id, raw_chars, final_chars, raw_tokens, final_tokens, receipts, saved_by_stage_json AS saved
               FROM request_metrics ORDER BY created_at, rowid`,
            )
            .iterate() as Iterable<Row>)
        : [];
      for (const r of found) {
        rows.push({
          sessionId: r.session_id,
          requestId: '',
          mode: '',
          rawChars: r.raw_chars,
          finalChars: r.final_chars,
          ...(r.raw_tokens === null ? {} : { rawTokens: r.raw_tokens }),
          ...(r.final_tokens === null ? {} : { finalTokens: r.final_tokens }),
          receipts: r.receipts,
          failedOpen: false,
          savedByStage: numbers(r.saved),
        });
      }
    } finally {
      db.close();
    }
  }
  // The vault's owner reads every tenant's rows: each session as `<tenant>/<session id>` (its stored key holds a control mark).
  const figures = figuresFromRows(rows);
  return { ...figures, sessions: figures.sessions.map((s) => ({ ...s, id: readableSessionId(s.id) })) };
}

/** A stored session key (`sessionStateKey`) as text: the session id, after its tenant and a slash when it has one. */
function readableSessionId(key: string): string {
  const { tenant, sessionId } = parseSessionStateKey(key);
  return tenant === '' ? sessionId : `${tenant}/${sessionId}`;
}

/**
 * The figures of the newest `limit` requests (default 10,000) any open store recorded (SQLite or
 * PostgreSQL: a gateway's live `/dashboard`), through its metrics port.
 *
 * @example
 * const html = renderReport(await readStoreFigures(terminator.vault), { source: 'live vault' });
 */
export async function readStoreFigures(
  store: Pick<MetricsStore, 'requestMetricRows'>,
  limit?: number,
): Promise<ReportInput> {
  return figuresFromRows(await store.requestMetricRows(limit));
}

/**
 * Group metric rows (oldest first) into the report's per-session series and sums.
 *
 * @example
 * import { figuresFromRows } from 'token-terminator/report';
 * const input = figuresFromRows(await vault.requestMetricRows());
 */
export function figuresFromRows(rows: readonly RequestMetricRow[]): ReportInput {
  const sessions = new Map<string, RequestPointInput[]>();
  for (const r of rows) {
    const points = sessions.get(r.sessionId) ?? [];
    sessions.set(r.sessionId, points);
    points.push({
      raw_tokens: r.rawTokens ?? 0,
      final_tokens: r.finalTokens ?? 0,
      raw_chars: r.rawChars,
      final_chars: r.finalChars,
      receipts: r.receipts,
      saved_by_stage: { ...r.savedByStage },
    });
  }
  const perSession: ReportSessionInput[] = [...sessions].map(([id, points]) => ({
    id,
    ...sums(points),
    per_request: points,
  }));
  return { ...sums(perSession.flatMap((s) => s.per_request ?? [])), sessions: perSession };
}

/** The totals of a series of points (a session, or all of them). */
function sums(points: readonly RequestPointInput[]) {
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
    for (const [k, v] of Object.entries(JSON.parse(json) as Record<string, unknown>))
      if (typeof v === 'number') out[k] = v;
  } catch {
    // A row another writer left malformed contributes no per-stage savings.
  }
  return out;
}
