/** cargo test. */
import type { RunnerRules } from './types.js';

export const cargo: RunnerRules = {
  noise: [
    /^test .+ \.\.\. ok$/,
    /^\s*(Compiling|Downloading|Downloaded|Finished|Fresh|Checking|Locking|Updating|Blocking)\s/,
  ],
  block: /^---- .+ stdout ----$/,
  failureLine: /^(?:thread '[^']*'(?: \(\d+\))? panicked at |test .+ \.\.\. FAILED$|test result: FAILED)/,
  recordFailure: /panicked at|^test \S+ \.\.\. FAILED$/,
  // A failing test's captured output, the list of failures, `assert_eq!`'s two sides.
  context: /^(?:---- .+ stdout ----$|failures:$|\s+(?:left|right): )/,
  summary: /^test result:|^error: test failed|^\s*Running\s/,
  failingIds: [/^test (\S+) \.\.\. FAILED$/],
  showsRun: (output) => /^test result: /m.test(output),
};
