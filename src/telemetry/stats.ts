/**
 * `token-terminator stats` sums: `Vault.metricsSummary()` computes them through the metrics port on
 * either dialect. `readMetricsSummary(path)` is the earlier synchronous reader of a SQLite vault
 * file, kept for existing callers (it lives with the SQLite dialect).
 */
export type { MetricsSummary } from '../vault/types.js';
export { reductionPct } from '../vault/metrics.js';
export { readMetricsSummary } from '../vault/dialect/sqlite/sqlite-metrics-file.js';
