/** Replay of recorded sessions through the whole pipeline, with the figures defined in ./figures.ts. */
export { replaySessions, requestCount } from './replay.js';
export { readSessions, type RecordedSession } from './sessions.js';
export type { ReplayFigures } from './figures.js';
export { renderFiguresTable, summaryLine } from './table.js';
