/**
 * What `diagnostics_visible_pct` counts as a diagnostic line (docs/fidelity.md, "What counts as a
 * diagnostic line", lists the rules with examples). Defined here, on its own, on purpose: the
 * figure measures the compactors and the request stages, so it must not share their classifier (a
 * classifier that measured itself would always score 100 %).
 */

/** The patterns, each with what it is for (the docs table is generated from the same list). */
export const DIAGNOSTIC_PATTERNS: readonly { readonly what: string; readonly re: RegExp }[] = Object.freeze([
  { what: 'pytest failure detail (`E   …`)', re: /^E {2,}\S/ },
  {
    what: "test summary failures (`FAILED x`, `ERROR x`, `FAIL x`, a bare `FAIL`, Go's `FAIL<tab>package`)",
    re: /^(?:FAILED|ERROR|FAIL)(?:[ :\t]|$)/,
  },
  { what: 'Python traceback header', re: /^Traceback \(most recent call last\):/ },
  {
    what: 'exception / error line (`ValueError: …`, `java.lang.IllegalStateException: …`)',
    re: /^(?:[\w$]+\.)*[A-Z][\w$]*(?:Error|Exception|Failure|Fault)\b(?::|$)/,
  },
  { what: 'Java cause chain', re: /^Caused by: \S/ },
  {
    what: 'pytest failure location (`tests/test_x.py:12: AssertionError`)',
    re: /^\S+:\d+: (?:[\w$]+\.)*[\w$]*(?:Error|Exception)\b/,
  },
  { what: 'uncaught exception in a thread', re: /^Exception in thread "/ },
  {
    what: 'compiler/linter error with file:line (`x.ts(3,4): error TS2322`, `Foo.java:12: error:`, flake8 `a.py:3:1: F401`)',
    re: /^\S+?(?::\d+|\(\d+,\d+\))(?::\d+)?:? (?:-\s)?(?:error|fatal error)\b|^\S+:\d+:\d+: [EF]\d{3,4}\b/i,
  },
  {
    what: 'ESLint (stylish) error lines under a file header (`12:5  error  …  no-undef`)',
    re: /^\d+:\d+\s+error\s+\S/,
  },
  { what: 'Go compiler and vet findings (`./main.go:12:2: undefined: x`)', re: /^\S+\.go:\d+:\d+: \S/ },
  { what: 'TypeScript error code', re: /\berror TS\d{3,5}\b/ },
  {
    what: 'Maven/Gradle error and failure lines',
    re: /^\[ERROR\]|^BUILD FAILURE\b|^FAILURE: Build failed|^> Task \S+ FAILED/,
  },
  {
    what: 'test counts with failures (`Tests run: 5, Failures: 1`, `1 failed`)',
    re: /\bFailures: [1-9]|\bErrors: [1-9]|\b[1-9]\d* (?:failed|errors?)\b/,
  },
  {
    what: 'npm / yarn / pnpm errors',
    re: /^npm ERR!|^npm error\b|^error (?:An unexpected error|Command failed)|^ERR_PNPM_/,
  },
  {
    what: 'Go and Rust panics, Go test failures',
    re: /^panic: |^thread '.*' panicked at|^--- FAIL: |^error\[E\d{4}\]/,
  },
  { what: 'generic `error:` / `fatal:` lines', re: /^(?:error|fatal|Error|ERROR|FATAL)(?:\[[^\]]*\])?: \S/ },
  {
    what: 'shell failures',
    re: /: command not found$|: No such file or directory$|^Segmentation fault|^Killed$|\bPermission denied$/,
  },
  {
    what: 'non-zero exit status',
    re: /\bexit(?:ed with)? (?:code|status)[ :=]+[1-9]\d*\b|<returncode>[1-9]\d*<\/returncode>/i,
  },
  {
    what: "verbose test runners' per-test failures (pytest `-v` `path::test FAILED  [ 20%]`, cargo `test x ... FAILED`, vitest/jest `× name`)",
    re: /^\S+::\S.*? (?:FAILED|ERROR)(?:\s|$)|^test \S.* \.\.\. FAILED$|^(?:×|✗|✕) \S/,
  },
  { what: 'assertion messages', re: /^AssertionError\b|^Expected: .+|^but (?:was|got):? .+/ },
]);

/** At most this many diagnostic lines count per output (the definition). */
export const MAX_DIAGNOSTIC_LINES = 20;

/** True when one line is a diagnostic line. */
export function isDiagnosticLine(line: string): boolean {
  const t = line.trim();
  return t !== '' && t.length <= 2000 && DIAGNOSTIC_PATTERNS.some(({ re }) => re.test(t));
}

/** The diagnostic lines of an output, trimmed, distinct, in order, at most `max`. */
export function diagnosticLines(output: string, max = MAX_DIAGNOSTIC_LINES): string[] {
  const out: string[] = [];
  const seen = new Set<string>();
  let inTraceback = false;
  for (const line of output.split('\n')) {
    if (out.length >= max) break;
    const t = line.trim();
    // Frames and their source lines are indented; the first unindented line closes the traceback.
    const closesTraceback = inTraceback && t !== '' && !/^\s/.test(line) && !TRACEBACK_HEADER.test(t);
    if (TRACEBACK_HEADER.test(t)) inTraceback = true;
    else if (closesTraceback) inTraceback = false;
    const exceptionLine = closesTraceback && EXCEPTION_NAME.test(t) && t.length <= 2000;
    if (seen.has(t) || !(exceptionLine || isDiagnosticLine(t))) continue;
    seen.add(t);
    out.push(t);
  }
  return out;
}

const TRACEBACK_HEADER = /^Traceback \(most recent call last\):/;
/** `Name`, `pkg.mod.Name` or either followed by `: message`. */
const EXCEPTION_NAME = /^(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?::|$)/;
