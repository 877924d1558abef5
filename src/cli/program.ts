import { Command, CommanderError } from 'commander';
import { PACKAGE_VERSION } from '../config/version.js';
import type { CommandRegistrar } from './commands/index.js';
import { exitCodeFor } from './context.js';

/**
 * Each command's module, loaded only when that command runs (or for the full help): the proxy
 * does not wait for the replay, bench and eval modules and what they import. In help order; add a
 * command: one file in commands/, one line here.
 */
const LOADERS: Readonly<Record<string, () => Promise<CommandRegistrar>>> = {
  status: async () => (await import('./commands/status.js')).registerStatus,
  artifact: async () => (await import('./commands/artifact.js')).registerArtifact,
  replay: async () => (await import('./commands/replay.js')).registerReplay,
  stats: async () => (await import('./commands/stats.js')).registerStats,
  compare: async () => (await import('./commands/compare.js')).registerCompare,
  bench: async () => (await import('./commands/bench.js')).registerBench,
  report: async () => (await import('./commands/report.js')).registerReport,
  eval: async () => (await import('./commands/eval.js')).registerEval,
  proxy: async () => (await import('./commands/proxy.js')).registerProxy,
  vault: async () => (await import('./commands/vault.js')).registerVault,
};

/**
 * The `token-terminator` program; commander errors throw instead of exiting. With `only` naming a
 * command, just that one is loaded and registered; otherwise every command (help, unknown names).
 */
export async function buildProgram(only?: string): Promise<Command> {
  const program = new Command('token-terminator')
    .description('Inspect and recover exact tool evidence from the Token Terminator vault.')
    .version(PACKAGE_VERSION)
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
  const names = only !== undefined && Object.hasOwn(LOADERS, only) ? [only] : Object.keys(LOADERS);
  const registrars = await Promise.all(names.map((name) => LOADERS[name]!()));
  for (const register of registrars) register(program);
  return program;
}

/**
 * Run the CLI on `argv` (without node and script) and return the exit code: 0 ok, 2 usage /
 * validation / unknown artifact, 1 unexpected. Never calls process.exit, so stdout drains fully.
 */
export async function run(argv: readonly string[]): Promise<number> {
  try {
    await (await buildProgram(argv[0])).parseAsync([...argv], { from: 'user' });
    return 0;
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode === 0 ? 0 : 2; // commander already printed it
    const code = exitCodeFor(error);
    const message = error instanceof Error ? error.message : String(error);
    process.stderr.write(`token-terminator: ${code === 1 ? `unexpected error: ${message}` : message}\n`);
    return code;
  }
}
