/** go test. */
import { headOf, type RunnerRules } from './types.js';

export const go: RunnerRules = {
  noise: [/^=== (RUN|PAUSE|CONT|NAME)\s/, /^\s*--- (PASS|SKIP):/, /^PASS$/],
  block: /^\s*--- FAIL:/,
  // A panic, `--- FAIL: TestX`, a test's `x_test.go:12:` message, the package's `FAIL`, `exit status 1`.
  failureLine: /^(?:\s*panic: |fatal error: |\s*--- FAIL: |\s+\S+_test\.go:\d+: |FAIL(?:\s|$)|exit status [1-9])/,
  recordFailure: /^FAIL\b(?!\s*[=(.,;])|^panic: |^--- FAIL/,
  // The header of a goroutine's stack.
  context: /^goroutine \d+ \[[^\]]+\]:$/,
  summary: /^(ok|FAIL|---)\s|^(PASS|FAIL)$|^panic:/,
  failingIds: [/^\s*--- FAIL: (\S+)/],
  showsRun: (output) => /^(=== RUN|--- (PASS|FAIL)|ok\s+\S+\s+[\d.]+s)/m.test(headOf(output)),
};
