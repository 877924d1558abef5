/** go test. */
import { headOf, type RunnerRules } from './types.js';

export const go: RunnerRules = {
  noise: [/^=== (RUN|PAUSE|CONT|NAME)\s/, /^\s*--- (PASS|SKIP):/, /^PASS$/],
  block: /^\s*--- FAIL:/,
  summary: /^(ok|FAIL|---)\s|^(PASS|FAIL)$|^panic:/,
  failingIds: [/^\s*--- FAIL: (\S+)/],
  showsRun: (output) => /^(=== RUN|--- (PASS|FAIL)|ok\s+\S+\s+[\d.]+s)/m.test(headOf(output)),
};
