/**
 * Built-in terminal compactors: one rendering per command family, the generic line compactor as
 * the fallback, the exit code always in the first line. Pure functions; the operators add the
 * vault write, the receipt and the strictly-smaller check.
 */
import { detectFamily, type CommandFamily } from '../tools/family.js';
import { compactLines } from './compact-text.js';
import { compactDiagnostics } from './diagnostics.js';
import { compactGitDiff, compactGitLog, compactGitStatus } from './git.js';
import { compactGrep } from './grep.js';
import { compactInstall } from './install.js';
import { compactListing } from './listing.js';
import { compactTestOutput } from './test-runners.js';

export { compactText, compactLines, selectLines, OMITTED_MARKER } from './compact-text.js';
export { factorRuns, collapseIdenticalRuns } from './factor.js';
export { stripAnsi, splitLines, codePointLength, isSignalLine, lineShape } from './lines.js';
export { compactGitDiff, compactGitLog, compactGitStatus } from './git.js';
export { compactGrep } from './grep.js';
export { compactListing } from './listing.js';
export { compactInstall } from './install.js';
export { compactDiagnostics } from './diagnostics.js';
export { compactTestOutput, type TestRunner } from './test-runners.js';

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
}

/** The compact rendering of one terminal output (may be larger than the input: callers check). */
export function compactTerminal(input: TerminalOutput, options: CompactTerminalOptions = {}): TerminalRendering {
  const maxChars = options.maxChars ?? 4000;
  const family = detectFamily(input.command, input.output);
  const specific = renderFamily(family, input.output, maxChars);
  const text = specific ?? compactLines(input.output, { maxChars });
  const exit = input.exitCode === undefined ? '' : `[exit code: ${input.exitCode}]\n`;
  return { family: specific === undefined ? 'generic' : family, text: exit + text };
}

function renderFamily(family: CommandFamily, output: string, maxChars: number): string | undefined {
  switch (family) {
    case 'git-status':
      return compactGitStatus(output);
    case 'git-diff':
      return compactGitDiff(output);
    case 'git-log':
      return compactGitLog(output);
    case 'vitest':
    case 'jest':
    case 'pytest':
    case 'maven':
    case 'gradle':
      return compactTestOutput(output, family, maxChars);
    case 'cargo-test':
      return compactTestOutput(output, 'cargo', maxChars);
    case 'go-test':
      return compactTestOutput(output, 'go', maxChars);
    case 'grep':
      return compactGrep(output, { maxChars });
    case 'listing':
      return compactListing(output);
    case 'install':
      return compactInstall(output, maxChars);
    case 'diagnostics':
      return compactDiagnostics(output);
    case 'generic':
      return undefined;
  }
}

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
        const error = typeof parsed['error'] === 'string' && parsed['error'] !== '' ? `\n[error] ${parsed['error']}` : '';
        return typeof code === 'number' ? { output: output + error, exitCode: code } : { output: output + error };
      }
    } catch {
      // Not JSON after all: treat as plain text.
    }
  }
  return exitCode === undefined ? { output: content } : { output: content, exitCode };
}
