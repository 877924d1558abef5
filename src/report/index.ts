/**
 * The HTML report (`token-terminator report`): figures in, one self-contained page out.
 *
 * @example
 * // Serve it live from any store (the gateway's GET /dashboard does this):
 * import { readStoreFigures, renderReport } from 'token-terminator/report';
 * res.setHeader('content-type', 'text/html; charset=utf-8').end(renderReport(await readStoreFigures(terminator.vault), { source: 'live vault' }));
 */
export { renderReport, type RenderReportOptions } from './render.js';
export {
  parseReportInput,
  costProfiles,
  FIDELITY_KEYS,
  recoveryCostProfiles,
  ReportInputError,
  type ReportInput,
  type ReportSessionInput,
  type RequestPointInput,
  type CostProfile,
  type FidelityKey,
} from './figures.js';
export { figuresFromRows, readStoreFigures, readVaultFigures } from './from-vault.js';
export { parseQualityResults, type QualitySummary } from './quality.js';
export { rateCardFromConfig, priceFigures, type RateCard, type RateCardConfig, type PricedLine } from './rate-card.js';
export { dashboardRoute } from './dashboard.js';
