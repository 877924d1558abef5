/**
 * `npx tsx bench/_window-probe.ts <sessions.jsonl> <id-substring|""> <W> [dump.jsonl]`: one replay
 * under a budgeting window, no baseline or timing runs; prints the figures (without the sessions'
 * full figures) as one JSON line, then one line per session with its window and sight figures.
 * Settings come from the environment (TOKEN_TERMINATOR_WINDOW_LOW_WATER_PCT,
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
const { sessions: perSession, fidelity: _fidelity, ...rest } = figures;
console.log(JSON.stringify(rest));
for (const s of perSession)
  console.log(
    JSON.stringify({
      id: s.id.split('/').at(-1)!.slice(0, 48),
      requests: s.requests,
      over_raw: s.requests_over_window_raw,
      over_sent: s.requests_over_window_sent,
      rewrites: s.window_rewrites,
      lines: s.use_lines_pct,
      words: s.use_words_pct,
      actions: s.actions_visible_pct,
      cost: s.effective_cost_with_recoveries_ratio,
    }),
  );
