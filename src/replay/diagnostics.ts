/**
 * Replay's ruler of diagnostic lines (`diagnostics_visible_pct`). It lives in the core
 * (src/measure/diagnostic-ruler.ts) so that the testing kit, a package entry that may not reach
 * replay, judges with the same ruler; it stays independent of the compactors' classifier.
 */
export {
  DIAGNOSTIC_PATTERNS,
  MAX_DIAGNOSTIC_LINES,
  diagnosticLines,
  isDiagnosticLine,
} from '../measure/diagnostic-ruler.js';
