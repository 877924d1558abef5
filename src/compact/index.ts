/**
 * Built-in terminal compactors: one rendering per command family, the generic line compactor as
 * the fallback, the exit code always in the first line. Pure functions; the operators add the
 * vault write, the receipt and the strictly-smaller check.
 */
import { definedFields } from '../options.js';
import { detectFamily, type CommandFamily } from '../tools/family.js';
import { compactLines } from './compact-text.js';
import { scanDiagnostics } from './diagnostic-lines.js';
import { compactDiagnostics } from './compiler-diagnostics.js';
import { choosePinned, DEFAULT_DIAGNOSTIC_CHARS, renderFaithful } from './faithful.js';
import { compactGitDiff, compactGitLog, compactGitStatus } from './git.js';
import { compactGrep, grepTerm } from './grep.js';
import { compactInstall } from './install.js';
import { splitLines, stripAnsi } from './lines.js';
import { compactListing } from './listing.js';
import type { TestRunner } from '../runners/index.js';
import { compactTestOutput, type FailureView } from './test-runners.js';

export interface TerminalOutput {
  /** The command that ran (used to pick the family); the output's shape decides when absent. */
  readonly command?: string;
  readonly output: string;
  /** Exit code when known: it is always kept in the rendering. */
  readonly exitCode?: number;
}

export interface TerminalRendering {
  readonly family: CommandFamily | 'generic';
  readonly text: string;
}

export interface CompactTerminalOptions {
  /** Target size in code points for line-budgeted renderings. Default 4000. */
  readonly maxChars?: number;
  /** Code points for a failing output's diagnostic lines, kept verbatim beyond `maxChars` (0: off). Default 8000. */
  readonly diagnosticChars?: number;
}

/**
 * Families whose outputs are evidence, not a run's outcome: their lines are never read as
 * diagnostics, and their views (exact counts, every path) are always made from the whole text.
 */
export const EVIDENCE_FAMILIES: ReadonlySet<CommandFamily> = new Set([
  'git-diff',
  'git-log',
  'git-status',
  'grep',
  'listing',
]);

/**
 * The compact rendering of one terminal output (may be larger than the input: callers check).
 * Aggressive on green, faithful on red: when the output shows a failure, every diagnostic line
 * that fits `diagnosticChars` is in the rendering verbatim, whichever family rendered it.
 */
export function compactTerminal(input: TerminalOutput, options: CompactTerminalOptions = {}): TerminalRendering {
  const maxChars = options.maxChars ?? 4000;
  const diagnosticChars = options.diagnosticChars ?? DEFAULT_DIAGNOSTIC_CHARS;
  const family = detectFamily(input.command, input.output);
  const exit = input.exitCode === undefined ? '' : `[exit code: ${input.exitCode}]\n`;
  let failure: FailureView | undefined;
  let lines: string[] | undefined;
  if (diagnosticChars > 0 && !EVIDENCE_FAMILIES.has(family)) {
    lines = splitLines(stripAnsi(input.output));
    const scan = scanDiagnostics(lines, {
      ...(input.exitCode === undefined ? {} : { exitCode: input.exitCode }),
      compiler: family === 'diagnostics',
    });
    if (scan.failing && scan.lines.length > 0) failure = { flagged: scan.lines, diagnosticChars };
  }
  const specific = FAMILY_VIEWS[family](input.output, { command: input.command, maxChars, diagnosticChars, failure });
  if (
    failure !== undefined &&
    lines !== undefined &&
    (specific === undefined || !keepsPinned(specific, lines, failure))
  ) {
    return { family: 'generic', text: exit + renderFaithful(lines, failure.flagged, { maxChars, diagnosticChars }) };
  }
  const text = specific ?? compactLines(input.output, { maxChars, diagnosticChars: 0 });
  return { family: specific === undefined ? 'generic' : family, text: exit + text };
}

/** Every diagnostic line that fits the budget is a line of `text`. */
function keepsPinned(text: string, lines: readonly string[], failure: FailureView): boolean {
  const shown = new Set(splitLines(text));
  return [...choosePinned(lines, failure.flagged, failure.diagnosticChars).chosen].every((i) => shown.has(lines[i]!));
}

/** What a family's view may read besides the output. */
interface FamilyInput {
  readonly command: string | undefined;
  readonly maxChars: number;
  readonly diagnosticChars: number;
  readonly failure: FailureView | undefined;
}

/** A family's own view; undefined when it finds nothing to do (the generic view follows). */
type FamilyView = (output: string, c: FamilyInput) => string | undefined;

const testView =
  (runner: TestRunner): FamilyView =>
  (output, c) =>
    compactTestOutput(output, runner, c.maxChars, c.failure);

const FAMILY_VIEWS: Readonly<Record<CommandFamily, FamilyView>> = {
  'git-status': compactGitStatus,
  'git-diff': compactGitDiff,
  'git-log': compactGitLog,
  vitest: testView('vitest'),
  jest: testView('jest'),
  pytest: testView('pytest'),
  maven: testView('maven'),
  gradle: testView('gradle'),
  'cargo-test': testView('cargo'),
  'go-test': testView('go'),
  grep: (output, c) => {
    // Match lines are a search's evidence: they get the diagnostic budget when it is larger.
    const term = c.command === undefined ? undefined : grepTerm(c.command);
    return compactGrep(output, { maxChars: Math.max(c.maxChars, c.diagnosticChars), ...definedFields({ term }) });
  },
  listing: compactListing,
  install: (output, c) => compactInstall(output, c.maxChars, c.failure),
  diagnostics: (output, c) => compactDiagnostics(output, 3, c.failure, c.maxChars),
  generic: () => undefined,
};

/**
 * Hosts such as Hermes return terminal results as JSON (`{"output": …, "exit_code": …}`): read the
 * output and exit code out of it so the compactors see plain text.
 */
export function readTerminalContent(content: string, exitCode?: number): { output: string; exitCode?: number } {
  if (content.startsWith('{') && content.endsWith('}')) {
    try {
      const parsed = JSON.parse(content) as Record<string, unknown>;
      const output = parsed['output'] ?? parsed['stdout'];
      const code = parsed['exit_code'] ?? parsed['exitCode'] ?? parsed['returncode'];
      if (typeof output === 'string') {
        const error =
          typeof parsed['error'] === 'string' && parsed['error'] !== '' ? `\n[error] ${parsed['error']}` : '';
        return typeof code === 'number' ? { output: output + error, exitCode: code } : { output: output + error };
      }
    } catch {
      // Not JSON after all: treat as plain text.
    }
  }
  return exitCode === undefined ? { output: content } : { output: content, exitCode };
}
