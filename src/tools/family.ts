/**
 * Command-family detection for terminal results: from the command line first (after stripping
 * wrappers such as `rtk`, env assignments, `npx`, `uv run`, `python -m`, git global options),
 * then from the output's shape when the command says nothing (a runner's shape in src/runners/).
 */
import { RUNNERS, type RunnerRules, type TestRunner } from '../runners/index.js';

export type CommandFamily =
  | 'git-status'
  | 'git-diff'
  | 'git-log'
  | 'vitest'
  | 'jest'
  | 'pytest'
  | 'cargo-test'
  | 'go-test'
  | 'maven'
  | 'gradle'
  | 'grep'
  | 'listing'
  | 'install'
  | 'diagnostics'
  | 'generic';

/** The command family of a test runner's output (cargo and go name theirs `<runner>-test`). */
const runnerFamily = (runner: TestRunner): CommandFamily =>
  runner === 'cargo' || runner === 'go' ? `${runner}-test` : runner;

const WRAPPERS = new Set(['sudo', 'env', 'time', 'nice', 'command', 'exec', 'npx', 'bunx', 'pnpx', 'rtk', 'xargs']);

/** The `&&`/`;`/`||` segments of a command line that run something (not cd, export, source, set). */
function segmentsOf(command: string): string[] {
  return command
    .split(/&&|\|\||;|\n/)
    .map((s) => s.trim())
    .filter((s) => s !== '' && !/^(cd|export|source|\.|set)\b/.test(s));
}

/** The words of the command that produced the output (last `&&`/`;`/`||` segment, first pipe stage). */
export function commandWords(command: string): string[] {
  const segments = segmentsOf(command.trim().replace(/^: RTK && /, ''));
  const producer = (segments[segments.length - 1] ?? '').split(/\|(?!\|)/)[0]!.trim();
  const words = producer.split(/\s+/).filter((w) => w !== '');
  let i = 0;
  const skip = (): boolean => {
    const w = words[i];
    if (w === undefined) return false;
    if (/^[A-Za-z_][A-Za-z0-9_]*=/.test(w) || WRAPPERS.has(w)) return true;
    if ((w === 'uv' || w === 'poetry' || w === 'pipenv' || w === 'bundle') && /^(run|exec)$/.test(words[i + 1] ?? ''))
      return ((i += 1), true);
    if ((w === 'pnpm' || w === 'npm' || w === 'yarn') && /^(exec|dlx|x)$/.test(words[i + 1] ?? ''))
      return ((i += 1), true);
    if (/^python(\d(\.\d+)?)?$/.test(w) && words[i + 1] === '-m') return ((i += 1), true);
    return false;
  };
  while (skip()) i += 1;
  return words.slice(i).map((w, k) => (k === 0 ? w.replace(/^.*\//, '') : w));
}

/** Family from the command line alone; 'generic' when it names nothing known. */
export function familyOfCommand(command: string): CommandFamily {
  const [tool = '', ...rest] = commandWords(command);
  const sub = rest.find((w) => !w.startsWith('-')) ?? '';
  if (tool === 'git') return gitFamily(rest);
  if (tool === 'diff' && rest.some((w) => /^-\w*u/.test(w))) return 'git-diff';
  if (tool === 'vitest' || tool === 'jest') return tool;
  if (tool === 'pytest' || tool === 'py.test') return 'pytest';
  if (tool === 'cargo') return sub === 'test' || sub === 'nextest' ? 'cargo-test' : 'generic';
  if (tool === 'go') return sub === 'test' ? 'go-test' : sub === 'vet' || sub === 'build' ? 'diagnostics' : 'generic';
  if (tool === 'mvn' || tool === 'mvnw' || tool === 'mvnd') return 'maven';
  if (tool === 'gradle' || tool === 'gradlew') return 'gradle';
  if (['grep', 'egrep', 'fgrep', 'rg', 'ag', 'ack'].includes(tool)) return 'grep';
  if (['ls', 'find', 'fd', 'tree', 'exa', 'eza'].includes(tool)) return 'listing';
  if (['tsc', 'eslint', 'javac', 'mypy', 'ruff', 'pyright', 'biome', 'tsgo'].includes(tool)) return 'diagnostics';
  if (['npm', 'pnpm', 'yarn', 'bun'].includes(tool)) {
    if (/^(i|install|ci|add|update|upgrade)$/.test(sub) || (tool === 'yarn' && sub === '')) return 'install';
    return 'generic';
  }
  if (/^pip\d?(\.\d+)?$/.test(tool) || tool === 'uv' || tool === 'poetry' || tool === 'bundle' || tool === 'gem') {
    return /^(install|sync|add|lock|update)$/.test(sub) || (tool === 'uv' && sub === 'pip') ? 'install' : 'generic';
  }
  return 'generic';
}

function gitFamily(rest: readonly string[]): CommandFamily {
  const words = [...rest];
  // Global options before the subcommand: -C dir, -c k=v, --no-pager, --git-dir=…
  while (words[0]?.startsWith('-')) {
    const option = words.shift()!;
    if (option === '-C' || option === '-c') words.shift();
  }
  const sub = words[0] ?? '';
  if (sub === 'status') return 'git-status';
  if (sub === 'diff' || sub === 'show') return words.includes('--stat') ? 'generic' : 'git-diff';
  if (sub === 'log') return words.some((w) => w === '-p' || w === '--patch') ? 'git-diff' : 'git-log';
  if (sub === 'grep') return 'grep';
  return 'generic';
}

/** Family from the command, then from the output's shape when the command is unknown (npm test, make …). */
export function detectFamily(command: string | undefined, output: string): CommandFamily {
  const fromCommand = command === undefined ? 'generic' : familyOfCommand(command);
  if (fromCommand !== 'generic') return fromCommand;
  const head = output.slice(0, 20000);
  if (/^diff --git /m.test(head)) return 'git-diff';
  for (const [runner, rules] of Object.entries(RUNNERS) as [TestRunner, RunnerRules][])
    if (rules.showsRun?.(output) === true) return runnerFamily(runner);
  if (/^\S+\(\d+,\d+\): error TS\d+/m.test(head)) return 'diagnostics';
  if (/^commit [0-9a-f]{40}/.test(head)) return 'git-log';
  return 'generic';
}

const FILE_READERS = new Set(['cat', 'head', 'tail', 'nl', 'bat', 'batcat', 'less', 'more']);

/**
 * True when the command reads files for the agent to look at (`cat f`, `head -n 50 f`,
 * `sed -n 10,40p f`, `nl f`): its output is the file's text, which the agent asked to see, as a
 * read_file result is. A pipeline whose last stage filters (`cat f | grep x`) is not a plain read.
 */
export function isFileRead(command: string | undefined): boolean {
  if (command === undefined) return false;
  const last = segmentsOf(command.trim()).at(-1) ?? '';
  if (last === '' || /\|(?!\|)/.test(last) || /[<>]/.test(last.replace(/\d?>&\d|2>\/dev\/null/g, ''))) return false;
  const [tool = '', ...rest] = commandWords(last);
  if (FILE_READERS.has(tool)) return rest.some((w) => !w.startsWith('-'));
  return tool === 'sed' && rest.includes('-n') && rest.some((w) => /^['"]?\d+(,\d+)?p['"]?$/.test(w));
}
