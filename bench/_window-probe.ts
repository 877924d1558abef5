/**
 * `npx tsx bench/_window-probe.ts <sessions.jsonl> <id-substring|""> <W> [dump.jsonl]`: one replay
 * under a budgeting window, no baseline or timing runs; prints the figures (without the sessions)
 * as one JSON line. Settings come from the environment (TOKEN_TERMINATOR_WINDOW_LOW_WATER_PCT,
 * TOKEN_TERMINATOR_WINDOW_FIT_ORDER …): how the fit orders and low-water marks of docs/window.md
 * were compared.
 */
import { readSessions, replaySessions } from '../src/replay/index.js';

const [path, id = '', window, dump] = process.argv.slice(2);
const sessions = (await readSessions(path!, Infinity)).filter((s) => s.id.includes(id));
const figures = await replaySessions(sessions, {
  window: Number(window),
  ledger: false,
  ...(dump === undefined ? {} : { dump }),
});
const { sessions: _sessions, fidelity: _fidelity, ...rest } = figures;
console.log(JSON.stringify(rest));
