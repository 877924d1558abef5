/**
 * Tests' synchronous, read-only summary of the request metrics in a SQLite vault FILE: opens it
 * read-only (never migrates or writes) and reads `request_metrics` / `request_component_metrics`, so a
 * test sees what a process wrote without opening a vault of its own (the library's reader is
 * `Vault.metricsSummary()`, either dialect).
 */
import { existsSync } from 'node:fs';
import Database from 'better-sqlite3';
import { reductionPct } from '../../src/vault/metrics.js';
import type { MetricsSummary } from '../../src/vault/types.js';

function empty(): MetricsSummary {
  return {
    requests: 0,
    sessions: 0,
    raw_chars: 0,
    final_chars: 0,
    raw_tokens: 0,
    final_tokens: 0,
    reduction_pct: 0,
    receipts: 0,
    failed_open_requests: 0,
    saved_by_stage: {},
    components: {},
    by_mode: {},
  };
}

function pct(part: number, whole: number): number {
  return whole <= 0 ? 0 : Math.round((part / whole) * 10_000) / 100;
}

/** Summarize the metrics of a vault file; an absent file yields zeros. */
export function readMetricsSummary(path: string): MetricsSummary {
  if (path === ':memory:' || !existsSync(path)) return empty();
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    db.pragma('busy_timeout = 5000');
    const hasTable =
      db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'request_metrics'").get() !== undefined;
    if (!hasTable) return empty();
    const t = db
      .prepare(
        `SELECT COUNT(*) AS requests, COUNT(DISTINCT session_id) AS sessions, COALESCE(SUM(raw_chars), 0) AS raw_chars,
           COALESCE(SUM(final_chars), 0) AS final_chars, COALESCE(SUM(raw_tokens), 0) AS raw_tokens,
           COALESCE(SUM(final_tokens), 0) AS final_tokens, COALESCE(SUM(receipts), 0) AS receipts,
           COALESCE(SUM(failed_open), 0) AS failed_open FROM request_metrics`,
      )
      .get() as Record<string, number>;
    const saved: Record<string, number> = {};
    for (const row of db.prepare('SELECT saved_by_stage_json AS j FROM request_metrics').iterate() as Iterable<{
      j: string;
    }>) {
      const parsed = JSON.parse(row.j) as Record<string, unknown>;
      for (const [stage, chars] of Object.entries(parsed))
        if (typeof chars === 'number') saved[stage] = (saved[stage] ?? 0) + chars;
    }
    const components: Record<string, { raw_tokens: number; final_tokens: number; raw_pct: number }> = {};
    const rows = db
      .prepare(
        'SELECT component, SUM(raw_tokens) AS raw, SUM(final_tokens) AS final FROM request_component_metrics GROUP BY component ORDER BY component',
      )
      .all() as { component: string; raw: number; final: number }[];
    const rawSum = rows.reduce((x, r) => x + r.raw, 0);
    for (const r of rows)
      components[r.component] = { raw_tokens: r.raw, final_tokens: r.final, raw_pct: pct(r.raw, rawSum) };
    const byMode: Record<string, { requests: number; raw_tokens: number; final_tokens: number }> = {};
    for (const r of db
      .prepare(
        'SELECT mode, COUNT(*) AS n, COALESCE(SUM(raw_tokens), 0) AS raw, COALESCE(SUM(final_tokens), 0) AS final FROM request_metrics GROUP BY mode ORDER BY mode',
      )
      .all() as { mode: string; n: number; raw: number; final: number }[]) {
      byMode[r.mode] = { requests: r.n, raw_tokens: r.raw, final_tokens: r.final };
    }
    return {
      requests: t['requests'] ?? 0,
      sessions: t['sessions'] ?? 0,
      raw_chars: t['raw_chars'] ?? 0,
      final_chars: t['final_chars'] ?? 0,
      raw_tokens: t['raw_tokens'] ?? 0,
      final_tokens: t['final_tokens'] ?? 0,
      reduction_pct: reductionPct(t['raw_tokens'] ?? 0, t['final_tokens'] ?? 0),
      receipts: t['receipts'] ?? 0,
      failed_open_requests: t['failed_open'] ?? 0,
      saved_by_stage: saved,
      components,
      by_mode: byMode,
    };
  } finally {
    db.close();
  }
}
