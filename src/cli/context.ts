/**
 * Shared plumbing for CLI commands: options every command takes, opening the vault from the config,
 * output helpers and the exit-code convention (2 = usage, validation or unknown artifact; 1 = unexpected).
 */
import { existsSync, readFileSync } from 'node:fs';
import { InvalidArgumentError, type Command } from 'commander';
import { loadConfig } from '../config/index.js';
import type { Config } from '../config/types.js';
import { TokenTerminatorError } from '../errors.js';
import { canonicalJson } from '../measure/index.js';
import { definedFields } from '../options.js';
import { createRecoveryTool, recoveryError, type RecoveryResult, type RecoveryToolHandle } from '../recovery/index.js';
import { createVault, vaultOptionsFromConfig } from '../vault/index.js';
import { vaultLocation } from '../vault/configured.js';
import type { Vault } from '../vault/types.js';

/** The session id the CLI uses as "host" for recovery calls. */
export const CLI_SESSION = 'cli';

/** An error with a chosen exit code; its message is printed to stderr as is. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = 2,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

/** Options every command accepts. */
export interface CommonOptions {
  db?: string;
  dbUrl?: string;
  json?: boolean;
}

/** Add `--db <path>` and `--json` to a command. */
export function withCommonOptions(command: Command): Command {
  return command
    .option('--db <path>', 'vault database file (default: TOKEN_TERMINATOR_DB_PATH or <data dir>/artifacts.sqlite3)')
    .option(
      '--db-url <url>',
      'shared vault in PostgreSQL, postgres://… (default: TOKEN_TERMINATOR_DB_URL; wins over --db)',
    )
    .option('--json', 'print machine-readable JSON');
}

/** Commander argument parser for an integer ≥ min. */
export function integerAtLeast(min: number): (value: string) => number {
  return (value) => {
    if (!/^\d+$/.test(value.trim()) || Number(value) < min)
      throw new InvalidArgumentError(`must be an integer ≥ ${min}`);
    return Number(value);
  };
}

/** Commander argument parser for a number `ok` accepts; `expected` completes "must be …". */
export function numberArg(ok: (n: number) => boolean, expected: string): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (value.trim() === '' || !ok(n)) throw new InvalidArgumentError(`must be ${expected}`);
    return n;
  };
}

/** The config for a command: environment plus `--db` / `--db-url`. A bad variable is a ConfigError (exit 2). */
export function cliConfig(
  options: Pick<CommonOptions, 'db' | 'dbUrl'>,
  env: Readonly<Record<string, string | undefined>> = process.env,
): Config {
  return loadConfig({ env, overrides: definedFields({ dbPath: options.db, dbUrl: options.dbUrl }) });
}

export function openConfiguredVault(config: Config): Promise<Vault> {
  return createVault(vaultOptionsFromConfig(config));
}

/** A database server always "exists" (connecting tells); a file vault only once created. */
export function vaultExists(config: Config): boolean {
  return config.dbUrl !== '' || config.dbPath === ':memory:' || existsSync(config.dbPath);
}

/**
 * Run `fn` on the configured vault, closing it afterwards. Reading commands never create a vault:
 * a missing file is a usage error.
 */
export async function withVault<T>(
  options: Pick<CommonOptions, 'db' | 'dbUrl'>,
  fn: (vault: Vault, config: Config) => Promise<T>,
): Promise<T> {
  const config = cliConfig(options);
  if (!vaultExists(config))
    throw new CliError(`no vault at ${config.dbPath} (set --db or TOKEN_TERMINATOR_DB_PATH, or --db-url)`);
  const vault = await openConfiguredVault(config);
  try {
    return await fn(vault, config);
  } finally {
    await vault.close();
  }
}

/** {@link withVault} with the recovery tool over the vault. */
export function withRecovery<T>(
  options: CommonOptions,
  fn: (tool: RecoveryToolHandle, config: Config) => Promise<T>,
): Promise<T> {
  // The CLI runs as whoever owns the vault file: it reads the whole store, not one session.
  return withVault(options, (vault, config) =>
    fn(
      createRecoveryTool({
        vault,
        config,
        scope: 'store',
        health: () => vault.health(),
        status: async () => ({ db_path: vaultLocation(config), db_engine: vault.engine }),
      }),
      config,
    ),
  );
}

/** Call the recovery tool; an error result becomes a CliError (exit 2 for the caller's mistakes, 1 otherwise). */
export async function recover(tool: RecoveryToolHandle, args: Record<string, unknown>): Promise<RecoveryResult> {
  const result = await tool.call(args, { sessionId: CLI_SESSION });
  const error = recoveryError(result);
  if (error !== undefined) {
    const mine = error.code === 'E_INVALID_ARGUMENTS' || error.code === 'E_ARTIFACT_NOT_FOUND';
    // The tool's hints name its actions (for a model); here the same step is a command.
    const message = error.message.replace(/\bartifact_(search|get|peek|find)\b/g, '`token-terminator artifact $1`');
    throw new CliError(`${message} [${error.code}]`, mine ? 2 : 1);
  }
  return result;
}

/** Write to stdout, waiting for the pipe to drain so large artifacts do not pile up in memory. */
export async function writeOut(text: string): Promise<void> {
  if (text === '') return;
  if (!process.stdout.write(text)) {
    await new Promise<void>((resolve) => process.stdout.once('drain', resolve));
  }
}

/** One result as sorted, compact JSON plus a newline. */
export function writeJson(value: unknown): Promise<void> {
  return writeOut(`${canonicalJson(value, { compact: true })}\n`);
}

/** A JSON file the user named as `what`; a missing or unparsable file is a CliError. */
export function readJson(path: string, what: string): unknown {
  if (!existsSync(path)) throw new CliError(`no ${what} at ${path}`);
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as unknown;
  } catch {
    throw new CliError(`${path} is not JSON (expected ${what})`);
  }
}

/** Exit code for anything a command throws. */
export function exitCodeFor(error: unknown): number {
  if (error instanceof CliError) return error.exitCode;
  return error instanceof TokenTerminatorError ? 2 : 1;
}
