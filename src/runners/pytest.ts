/** pytest. */
import { headOf, type RunnerRules } from './types.js';

export const pytest: RunnerRules = {
  noise: [
    /\sPASSED\s*(?:\[\s*\d+%\])?$/,
    /^\S+\.py\s+[.sx]+\s*(?:\[\s*\d+%\])?$/,
    /^(platform|cachedir|rootdir|configfile|plugins|collecting)\b/,
  ],
  block: /^_{3,} .+ _{3,}$/,
  // `E` lines of assertion rewriting, the short summary, the final count, verbose
  // `tests/a.py::test_x FAILED   [ 20%]` rows.
  failureLine:
    /^(?:E(?:\s|$)|(?:FAILED|ERROR) \S|=+ [^=]*\b\d+ (?:failed|errors?)\b.*=$|\S+::\S.*? (?:FAILED|ERROR)(?:\s|$))/,
  // In a read view: `E   ` details, a location ending in an exception, the short summary.
  recordFailure: /^E {2,}\S|^\S+:\d+: (?:[\w$]+\.)*[\w$]*(?:Error|Exception)\b|^(?:FAILED|ERROR)\b(?!\s*[=(.,;])/,
  // A failing test's header, the line pytest points at (not gradle's `> Task`), a location line.
  context: /^(?:_{3,} .+ _{3}$|>\s{3}|[^\s:]+\.py:\d+:(?: |$))/,
  summary: /^=+ .*(passed|failed|error|skipped|deselected|xfailed|no tests ran).* =+$|^(FAILED|ERROR) /,
  // The short summary's `FAILED tests/a.py::test_x - …` and verbose `tests/a.py::test_x FAILED`.
  failingIds: [/^(?:FAILED|ERROR) (\S+::\S+|\S+\.py)/, /^(\S+::\S+) (?:FAILED|ERROR)\b/],
  showsRun: (output) => /^=+ test session starts =+$/m.test(headOf(output)),
};
