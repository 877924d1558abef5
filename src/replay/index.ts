/** Replay of recorded sessions through the whole pipeline, with the figures defined in ./figures.ts. */
export { replaySessions, requestCount, type ReplayOptions } from './replay.js';
export { REPLAY_TOOL_NAMES } from '../tools/names.js';
export { readSessions, parseSessionLine, SessionFormatError, type RecordedSession } from './sessions.js';
export {
  FigureAccumulator,
  commonPrefixChars,
  commonPrefixOfStrings,
  percentile,
  type ReplayFigures,
  type ReplayTotals,
  type SessionFigures,
  type RequestSample,
} from './figures.js';
export { ReceiptVerifier, recoverExact } from '../receipts/verify.js';
export { renderFiguresTable, summaryLine } from './table.js';
export type { RequestPoint } from './series.js';
