/** Content-free telemetry: incremental request measurement, attribution, metrics rows, stats, the experiment ledger. */
export {
  createMessagesMeter,
  type MessagesMeter,
  type MessageEntry,
  type MessagesMeterOptions,
} from '../ledger/messages-meter.js';
export { attributeRequest, COMPONENTS, type Attribution, type Component, type ComponentSize } from './attribution.js';
export { savedByStage, anyFailedOpen, requestMetric, type RequestMetricInput } from './metrics.js';
export { reductionPct } from '../vault/metrics.js';
export type { MetricsSummary } from '../vault/types.js';
export {
  openLedger,
  LedgerError,
  type Ledger,
  type LedgerSession,
  type Usage,
  type TurnOutcome,
  type ModeSummary,
  type Comparison,
} from './ledger.js';
