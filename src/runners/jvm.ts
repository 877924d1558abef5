/** Maven (surefire) and Gradle. */
import { headOf, type RunnerRules } from './types.js';

export const maven: RunnerRules = {
  noise: [
    /^\[INFO\] (Download(ing|ed) from|Progress)/,
    /^(Download(ing|ed)|Progress \()/,
    /^\[INFO\] Tests run: .*, Failures: 0, Errors: 0, Skipped: \d+, Time elapsed/,
  ],
  block: /<<< (FAILURE|ERROR)!/,
  // `[ERROR]` records and surefire's `<<< FAILURE!` anywhere in a line.
  failureLine: /^(?:\[ERROR\]|[\s\S]*?<<< (?:FAILURE|ERROR)!)/,
  recordFailure: /^\[ERROR\]|BUILD FAILURE/,
  summary: /^\[(INFO|ERROR|WARNING)\] (BUILD|Tests run:|Total time|Finished at)|^Tests run:/,
  // `<<< FAILURE!` headers and `[ERROR]   Class.method` rows.
  failingIds: [/^\[ERROR\]\s+(?:Tests run:.*<<< (?:FAILURE|ERROR)! -+ in )?(\S+(?:\.|#)\w+(?::\d+)?)(?:\s|$)/],
  showsRun: (output) => /^\[INFO\] (Scanning for projects|BUILD)/m.test(headOf(output)),
};

export const gradle: RunnerRules = {
  noise: [/^> Task \S+ (UP-TO-DATE|NO-SOURCE|FROM-CACHE|SKIPPED)$/, /\bPASSED$/, /^Download(ing)?\s/],
  block: /\bFAILED$/,
  // The build's failure, a failed test (`Class > method FAILED`) or task, `* What went wrong:`.
  failureLine: /^(?:FAILURE: Build failed|\S[^>]* > .*FAILED$|\* What went wrong:|> Task \S+ FAILED)/,
  summary: /^(BUILD (SUCCESSFUL|FAILED)|\d+ tests? completed|\d+ actionable tasks)/,
  failingIds: [/^(\S[^>]* > .*?) FAILED$/],
};
