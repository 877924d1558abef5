/**
 * The HTML report (`token-terminator report`): figures in, one self-contained page out.
 *
 * @example
 * // Serve it live (a gateway's /dashboard):
 * import { readVaultFigures, renderReport } from 'token-terminator/report';
 * res.setHeader('content-type', 'text/html; charset=utf-8').end(renderReport(readVaultFigures(dbPath), { source: 'live vault' }));
 */
export { renderReport, type RenderReportOptions } from './render.js';
export { parseReportInput, costProfiles, FIDELITY_KEYS, ReportInputError, type ReportInput, type ReportSessionInput, type RequestPointInput, type CostProfile, type FidelityKey } from './figures.js';
export { readVaultFigures } from './from-vault.js';
export { parseQualityResults, type QualitySummary } from './quality.js';
