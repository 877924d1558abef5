import { Command, CommanderError } from 'commander';
import { PACKAGE_VERSION } from '../config/version.js';
import { commands } from './commands/index.js';
import { exitCodeFor } from './context.js';

/** The `token-terminator` program with every registered command; commander errors throw instead of exiting. */
export function buildProgram(): Command {
  const program = new Command('token-terminator')
    .description('Inspect and recover exact tool evidence from the Token Terminator vault.')
    .version(PACKAGE_VERSION)
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
  for (const register of commands) register(program);
  return program;
}

/**
 * Run the CLI on `argv` (without node and script) and return the exit code: 0 ok, 2 usage /
 * validation / unknown artifact, 1 unexpected. Never calls process.exit, so stdout drains fully.
 */
export async function run(argv: readonly string[]): Promise<number> {
  try {
    await buildProgram().parseAsync([...argv], { from: 'user' });
    return 0;
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode === 0 ? 0 : 2; // commander already printed it
    const code = exitCodeFor(error);
    const message = error instanceof Error ? error.message : String(error);
    process.stderr.write(`token-terminator: ${code === 1 ? `unexpected error: ${message}` : message}\n`);
    return code;
  }
}
