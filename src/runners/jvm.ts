/** Maven (surefire) and Gradle. */
import { headOf, type RunnerRules } from './types.js';

export const maven: RunnerRules = {
  noise: [
    /^\[INFO\] (Download(ing|ed) from|Progress)/,
    /^(Download(ing|ed)|Progress \()/,
    /^\[INFO\] Tests run: .*, Failures: 0, Errors: 0, Skipped: \d+, Time elapsed/,
  ],
  block: /<<< (FAILURE|ERROR)!/,
  summary: /^\[(INFO|ERROR|WARNING)\] (BUILD|Tests run:|Total time|Finished at)|^Tests run:/,
  // `<<< FAILURE!` headers and `[ERROR]   Class.method` rows.
  failingIds: [/^\[ERROR\]\s+(?:Tests run:.*<<< (?:FAILURE|ERROR)! -+ in )?(\S+(?:\.|#)\w+(?::\d+)?)(?:\s|$)/],
  showsRun: (output) => /^\[INFO\] (Scanning for projects|BUILD)/m.test(headOf(output)),
};

export const gradle: RunnerRules = {
  noise: [/^> Task \S+ (UP-TO-DATE|NO-SOURCE|FROM-CACHE|SKIPPED)$/, /\bPASSED$/, /^Download(ing)?\s/],
  block: /\bFAILED$/,
  summary: /^(BUILD (SUCCESSFUL|FAILED)|\d+ tests? completed|\d+ actionable tasks)/,
  failingIds: [/^(\S[^>]* > .*?) FAILED$/],
};
