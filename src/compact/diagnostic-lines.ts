/**
 * The diagnostic lines of an output: what a reader needs to act on a failure. Found by the lines'
 * shape, so an output whose command is unknown (`make check`, `npm test`, a script) is read the
 * same way as one whose command named the tool.
 *
 * Two grades. A failure line on its own shows that the run failed: pytest `E` lines and
 * `FAILED`/`ERROR` summaries, exception lines and `Caused by:` chains, compiler errors with
 * file:line, `[ERROR]`, `npm ERR!`, `panic:`, `--- FAIL:`, `test result: FAILED`, a non-zero exit
 * status. A context line is kept with them but proves nothing alone: the frames of a Python
 * traceback (with the source lines of the last ones), the first project frames of a Java, Node, Go or Rust stack, the `-->` location of a
 * rustc error, the `>` line pytest points at, a failing test's header.
 */

import { RUNNERS } from '../runners/index.js';

export interface DiagnosticScan {
  /** The output shows a failure: a failure line, or a non-zero exit status. */
  readonly failing: boolean;
  /** Ascending indices of every diagnostic line (failure and context lines). */
  readonly lines: readonly number[];
}

export interface ScanOptions {
  /** Exit status when known; non-zero means failing. */
  readonly exitCode?: number;
  /**
   * The command named a compiler or linter (tsc, go vet, …): every `file:line:col: message` line
   * is then a failure line, with or without a severity word.
   */
  readonly compiler?: boolean;
}

/** The sources of one rule of every runner (src/runners/), each once. */
function runnerSources(rule: 'failureLine' | 'recordFailure' | 'context'): string[] {
  const sources = Object.values(RUNNERS).flatMap((r) => (r[rule] === undefined ? [] : [r[rule].source]));
  return [...new Set(sources)];
}

// Anchored alternatives share one `^` so the engine tries each line once, not at every column;
// the few patterns that may sit anywhere in a line are a separate, short alternation.
const FAILURE_START = new RegExp(
  '^(?:' +
    [
      String.raw`Traceback \(most recent call last\):`,
      String.raw`(?:During handling of the above exception|The above exception was the direct cause)`,
      String.raw`(?:Exception in thread |\s*Caused by: |\s*Suppressed: )`,
      String.raw`\s*(?:[A-Za-z_$][\w$]*\.)*[A-Z][\w$]*(?:Error|Exception|Failure|Exit|Interrupt)(?:: .*)?$`, // exception line
      String.raw`\s*(?:\w*Error|[\w.]+Exception)\b(?:: .*)?$`,
      String.raw`e: \S`, // kotlin compiler
      String.raw`\S[^(]*\(\d+,\d+\): error TS\d+:|\S[^ ]*:\d+:\d+ - error TS\d+:|Found \d+ errors?\b`, // tsc
      String.raw`\S+\.java:\d+: error: |\d+ errors?$`, // javac
      String.raw`[^\s:][^:]*:\d+(?::\d+)?:\s*(?:fatal error|error|Error)\b`, // gcc, clang, mypy, go build
      String.raw`[^\s:]+\.(?:go|rs|c|h|cc|cpp|hpp|m|swift|kt|java|scala|cs|ts|tsx|js|jsx|mjs|py|rb|php):\d+:\d+: \S`, // file:line:col: message
      String.raw`error(?:\[E?\d+\])?: `, // rustc, cargo, git
      String.raw`\s+\d+:\d+\s+error\s`, // eslint stylish row
      String.raw`npm (?:ERR!|error)\b|(?:yarn )?error \S|\s*ELIFECYCLE\b`,
      String.raw`\[exit code: [1-9]\d*\]`,
      String.raw`make(?:\[\d+\])?: \*\*\* |Killed$`,
      String.raw`(?:fatal|FATAL|ERROR|Error)(?:\[[\w-]+\])?: `,
      // Each test runner's own failure lines, in its family's file.
      ...runnerSources('failureLine'),
    ].join('|') +
    ')',
);
const FAILURE_ANY =
  /\bBUILD (?:FAILURE|FAILED)\b|ERR_PNPM_|Segmentation fault|core dumped|: command not found$|\b(?:exited|returned|failed) with (?:exit )?(?:code|status) [1-9]|non-zero exit status/;

const CONTEXT = new RegExp(
  '^(?:' +
    [
      String.raw`\s+\[Previous line repeated \d+ more times\]$`,
      String.raw`\s+--> \S+:\d+(?::\d+)?$`, // rustc location
      String.raw`\s+\d+:\d+\s+warning\s`,
      // Each test runner's context lines (a failing test's header, …), in its family's file.
      ...runnerSources('context'),
    ].join('|') +
    ')',
);

/**
 * What a line-numbered view (a file read) shows as a failure record: `E   ` details, a pytest
 * location ending in an exception, failure counts, `error:`/`fatal:`, a shell's missing file, a
 * non-zero exit status, failing test summaries.
 */
const RECORD_FAILURE = new RegExp(
  [
    String.raw`^Traceback \(most recent call last\)`,
    String.raw`^(?:[\w$]+\.)*[A-Z][\w$]*(?:Error|Exception)\b(?::|$)`,
    String.raw`^Caused by: `,
    String.raw`\b(?:error|fatal)(?:\[\w+\])?:`,
    String.raw`\berror TS\d+`,
    String.raw`^npm ERR!|^npm error\b`,
    String.raw`: command not found$|No such file or directory$`,
    String.raw`\b[1-9]\d* (?:failed|errors?)\b`,
    String.raw`\bexit(?:ed with)? (?:code|status)[ :=]+[1-9]`,
    // Each test runner's failure records, in its family's file.
    ...runnerSources('recordFailure'),
  ].join('|'),
);
/**
 * Plain lines that state a failure without the shapes above: failure counts (`3 failed`,
 * `Failures: 1`), a shell's missing file or refused permission, assertion messages.
 */
const STATED_FAILURE =
  /\b[1-9]\d* (?:failed|errors?)\b|\b(?:Failures|Errors): [1-9]|: No such file or directory$|\bPermission denied$|^(?:Expected: |but (?:was|got):? )\S/;
/**
 * A log record's severity (`2026-01-02 10:00:01 ERROR db: refused`, `[FATAL] …`, `level=error`):
 * upper case and a whole word, not a constant being assigned or called (`ERROR = 1`, `FATAL(`).
 */
const LOG_LEVEL = /(?:^|[\s[(|:])(?:ERROR|FATAL|CRITICAL|SEVERE)(?!\w|\s*[=(.,;'"])|\blevel=(?:error|fatal|critical)\b/;
/**
 * The line-number prefix of an editor or file-read view (`123:`, `00042| `, `  12\t`, `  7→`): a
 * numbered line is read by what follows it, so a log file read through a read tool keeps its
 * ERROR lines, while source code (`123:  throw new X()`) is not a failure.
 */
export const NUMBERED_LINE = /^\s*(\d+)(?:[:|]\s?|\t|\s?→)/;
/** ESLint's stylish format (`  12:5  error  'x' is not defined  no-undef`) and Go's `file.go:12:2: msg`. */
const LINT_LINE = /^\s*\d+:\d+\s+error\s+\S|^\S+\.go:\d+:\d+: \S/;

/**
 * True when a line on its own shows that something failed. The one classifier of failure lines:
 * the diagnostic scan of the first views, the bounded views, the digests and the duplicate
 * finder all read it (replay's ruler, src/measure/diagnostic-ruler.ts, stays independent of it).
 *
 * @example
 * isFailureLine('tests/test_a.py::test_one FAILED                  [ 20%]'); // true
 * isFailureLine('123:        throw new IllegalStateException("boom");'); // false (source in a read)
 */
export function isFailureLine(line: string): boolean {
  if (line.length > 4000) return false;
  if (LINT_LINE.test(line)) return true;
  const numbered = NUMBERED_LINE.exec(line);
  if (numbered !== null) {
    // Source or a log shown by a read tool: only what reads as a failure record counts.
    const t = line.slice(numbered[0].length).trim();
    return t !== '' && (RECORD_FAILURE.test(t) || LOG_LEVEL.test(t));
  }
  return FAILURE_START.test(line) || FAILURE_ANY.test(line) || STATED_FAILURE.test(line);
}

const PY_FRAME = /^\s+File ".*", line \d+/;
const JVM_FRAME = /^\s+at [\w$.<>/-]+\(.*\)$/;
const NODE_FRAME = /^\s+at (?:.+ \()?(?:file:\/\/)?[^\s()]+:\d+:\d+\)?$/;
const JVM_LIBRARY =
  /^\s+at (?:[\w.-]+\/)?(?:java|javax|jdk|sun|com\.sun|org\.junit|junit|org\.opentest4j|org\.apache\.maven|org\.gradle|worker\.org\.gradle|org\.testng|kotlin|kotlinx|scala|groovy|org\.codehaus\.groovy|org\.springframework\.test|org\.mockito|net\.bytebuddy)\./;
const NODE_LIBRARY = /\(?node:|node_modules\/|\(<anonymous>\)$/;
const GO_FILE = /^\t\S+\.go:\d+/;
const RUST_FRAME = /^\s+\d+: \S/;
const RUST_AT = /^\s+at \S+:\d+:\d+$/;
const ESLINT_FILE = /^(?:\/|\.{0,2}\/?[\w@.-]+\/)\S*\.\w+$/;

/** Frames kept per stack: the first one, then project frames up to this many. */
const PROJECT_FRAMES = 3;
/** Python frames kept from the end of each traceback. */
const LAST_PY_FRAMES = 3;

/** The state of one scan: the lines marked so far and the traceback or stack being read. */
class Scanner {
  readonly marked: Uint8Array;
  failures = 0;
  private pyFrames: number[] | undefined; // frames of the traceback being read
  private pyRepeats: number[] = [];
  private stack: 'jvm' | 'node' | 'go' | 'rust' | undefined;
  private stackFrames = 0;
  private stackProject = 0;
  private panicMessage = 0; // rust: lines after "panicked at" that carry the message
  private eslintFile = -1;

  constructor(
    private readonly lines: readonly string[],
    private readonly options: ScanOptions,
  ) {
    this.marked = new Uint8Array(lines.length);
  }

  /** Line `i`; returns how many of the lines after it were read with it (a Go frame's file line). */
  scan(i: number): number {
    const line = this.lines[i]!;
    if (line.length > 4000) return 0; // never a diagnostic we could keep verbatim
    if (this.pyFrames !== undefined) {
      this.tracebackLine(i, line, this.pyFrames);
      return 0;
    }
    if (this.panicMessage > 0) {
      if (line.trim() === '' || /^(?:note|stack backtrace):/.test(line)) this.panicMessage = 0;
      else {
        this.marked[i] = 1;
        this.panicMessage -= 1;
        return 0;
      }
    }
    if (
      this.stack !== undefined &&
      this.stack !== 'go' &&
      line !== '' &&
      !/^\s/.test(line) &&
      line !== 'stack backtrace:'
    )
      this.stack = undefined;
    if (isFailureLine(line) || (this.options.compiler === true && /^[^\s:][^:]*:\d+(?::\d+)?: \S/.test(line))) {
      this.failureLine(i, line);
      return 0;
    }
    if (line.indexOf(' ') < 0 && ESLINT_FILE.test(line)) this.eslintFile = i;
    else if (line.trim() === '') this.eslintFile = -1;
    if (CONTEXT.test(line) || (this.options.compiler === true && /^# \S+$/.test(line))) {
      this.marked[i] = 1;
      if (line.startsWith('goroutine ')) [this.stack, this.stackFrames, this.stackProject] = ['go', 0, 0];
      return 0;
    }
    const indented = line.charCodeAt(0) === 32 || line.charCodeAt(0) === 9;
    if (!indented && this.stack !== 'go') return 0;
    if (this.stack === 'jvm' || this.stack === undefined) this.jvmFrame(i, line);
    else if (this.stack === 'go') return this.goFrame(i, line);
    else if (this.stack === 'rust') this.rustFrame(i, line);
    return 0;
  }

  private tracebackLine(i: number, line: string, frames: number[]): void {
    if (PY_FRAME.test(line)) {
      frames.push(i);
      return;
    }
    if (/^\s+\[Previous line repeated \d+ more times\]$/.test(line)) this.pyRepeats.push(i);
    if (/^\s/.test(line) || line === '') return;
    this.closeTraceback();
    // The first unindented line after the frames is the exception, whatever its class is called.
    this.marked[i] = 1;
    this.failures += 1;
  }

  closeTraceback(): void {
    if (this.pyFrames === undefined) return;
    // Every frame's location (the call path is cheap); the source lines of the last frames only.
    for (const f of this.pyFrames) this.marked[f] = 1;
    const kept = this.pyFrames.slice(-LAST_PY_FRAMES);
    for (const r of this.pyRepeats) if (kept.some((f) => f < r && f + 4 > r)) this.marked[r] = 1;
    this.pyRepeats = [];
    for (const f of kept) {
      this.marked[f] = 1;
      // The source line under a frame (not pytest's or CPython's caret underline).
      const code = this.lines[f + 1];
      if (code !== undefined && /^\s{4,}\S/.test(code) && !/^\s*[~^]+\s*$/.test(code)) this.marked[f + 1] = 1;
    }
    this.pyFrames = undefined;
  }

  private failureLine(i: number, line: string): void {
    this.marked[i] = 1;
    this.failures += 1;
    if (line.startsWith('Traceback (most recent call last):')) this.pyFrames = [];
    else if (/^\s*panic: |^fatal error: /.test(line)) this.stack = 'go';
    else if (line.startsWith('thread ')) {
      this.panicMessage = 6;
      this.stack = 'rust';
    } else if (!/^\s+at /.test(line)) {
      this.stack = /Exception|Error|Caused by|Suppressed|Throwable/.test(line) ? 'jvm' : this.stack;
    }
    if (this.stack === 'jvm' || this.stack === 'rust') [this.stackFrames, this.stackProject] = [0, 0];
    if (/^\s+\d+:\d+\s+(?:error|warning)\s/.test(line) && this.eslintFile >= 0) this.marked[this.eslintFile] = 1;
  }

  private jvmFrame(i: number, line: string): void {
    const jvm = JVM_FRAME.test(line);
    const node = !jvm && NODE_FRAME.test(line);
    if (!jvm && !node) return;
    this.stack = 'jvm';
    const project = jvm ? !JVM_LIBRARY.test(line) : !NODE_LIBRARY.test(line);
    if (this.stackFrames === 0 || (project && this.stackProject < PROJECT_FRAMES)) this.marked[i] = 1;
    if (project) this.stackProject += 1;
    this.stackFrames += 1;
  }

  private goFrame(i: number, line: string): number {
    // Frames come in pairs: the function, then `\t/path/file.go:NN +0x…`.
    const next = this.lines[i + 1];
    if (next !== undefined && GO_FILE.test(next) && !GO_FILE.test(line)) {
      // Project code: package main, or a module path whose first element is a domain.
      const fn = line.replace(/^created by /, '').replace(/\(.*$/, '');
      const project = fn.startsWith('main.') || (fn.includes('/') && fn.split('/')[0]!.includes('.'));
      if (project && this.stackProject < PROJECT_FRAMES) {
        this.marked[i] = 1;
        this.marked[i + 1] = 1;
        this.stackProject += 1;
      }
      return 1;
    }
    if (line.trim() !== '' && !/^\s/.test(line)) this.stack = undefined;
    return 0;
  }

  private rustFrame(i: number, line: string): void {
    if (RUST_AT.test(line) || !RUST_FRAME.test(line)) return;
    const at = this.lines[i + 1];
    const project = at !== undefined && RUST_AT.test(at) && !/ at \/rustc\/|\/\.cargo\/registry\//.test(at);
    if (project && this.stackProject < PROJECT_FRAMES) {
      this.marked[i] = 1;
      this.marked[i + 1] = 1;
      this.stackProject += 1;
    }
  }
}

/** Scan lines (ANSI already stripped) for diagnostic lines. */
export function scanDiagnostics(lines: readonly string[], options: ScanOptions = {}): DiagnosticScan {
  const scanner = new Scanner(lines, options);
  for (let i = 0; i < lines.length; i += 1) i += scanner.scan(i);
  scanner.closeTraceback();
  const failing = scanner.failures > 0 || (options.exitCode !== undefined && options.exitCode !== 0);
  const out: number[] = [];
  for (let i = 0; i < scanner.marked.length; i += 1) if (scanner.marked[i] === 1) out.push(i);
  return { failing, lines: out };
}
