/** vitest and jest. */
import { headOf, tailOf, type RunnerRules } from './types.js';

/** `FAIL src/a.test.ts > suite > case`, `× case 12ms`. */
const FAILING_ID = /^\s*(?:FAIL|×|✗|✕)\s+(\S.*?)(?:\s+\d+(?:\.\d+)?\s?m?s)?$/;

/** `FAIL file`, `× case`, jest's `● suite › case`, the failed counts of the summary. */
const FAILURE_LINE = /^\s*(?:(?:FAIL|×|✗|✕)\s|●\s|Tests?\s+\d+ failed|Test (?:Files|Suites):?\s+\d+ failed|❌ \S)/;

/** In a read view: `FAIL file`, a failing test's mark. */
const RECORD_FAILURE = /^FAIL\b(?!\s*[=(.,;])|^\s*(?:✗|×|✕) \S/;

/** vitest's failure message and location. */
const CONTEXT = /^(?:\s*→ |\s*❯ \S+:\d+:\d+)/;

export const vitest: RunnerRules = {
  noise: [/^\s*[✓√]\s/, /^\s*PASS\s/, /^\s*↓\s.*\[skipped\]/],
  block: /^\s*FAIL\s/,
  failureLine: FAILURE_LINE,
  recordFailure: RECORD_FAILURE,
  context: CONTEXT,
  summary: /^\s*(Test Files|Tests|Snapshots|Start at|Duration|Test Suites|Time)\b|Failed Tests \d+/,
  failingIds: [FAILING_ID],
  showsRun: (output) => /^\s*Test Files\s+\d+/m.test(tailOf(output)) || /^ RUN\s+v\d/m.test(headOf(output)),
};

export const jest: RunnerRules = {
  noise: [/^\s*[✓√]\s/, /^\s*PASS\s/],
  block: /^\s*●\s/,
  failureLine: FAILURE_LINE,
  recordFailure: RECORD_FAILURE,
  context: CONTEXT,
  summary: /^\s*(Test Suites|Tests|Snapshots|Time|Ran all test suites)\b/,
  failingIds: [FAILING_ID],
  showsRun: (output) => /^Test Suites: /m.test(tailOf(output)),
};
