/** `token-terminator stats` sums: `Vault.metricsSummary()` computes them through the metrics port on either dialect. */
export type { MetricsSummary } from '../vault/types.js';
export { reductionPct } from '../vault/metrics.js';
