import type { Command } from 'commander';
import type { Config } from '../../config/types.js';
import { TokenTerminatorError } from '../../errors.js';
import { createRecoveryTool } from '../../recovery/index.js';
import type { Vault } from '../../vault/types.js';
import { vaultLocation } from '../../vault/configured.js';
import {
  cliConfig,
  openConfiguredVault,
  recover,
  vaultExists,
  withCommonOptions,
  writeJson,
  writeOut,
  type CommonOptions,
} from '../context.js';

/** A stand-in for a vault file that does not exist yet: `status` reports it instead of creating one. */
function missingVault(path: string): Vault {
  const fail = async (): Promise<never> => {
    throw new TokenTerminatorError('E_VAULT_MISSING', `no vault at ${path}`);
  };
  return new Proxy({} as Vault, { get: (_target, prop) => (prop === 'path' ? path : fail) });
}

function flatten(value: unknown, prefix = ''): string[] {
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    return [`${prefix}: ${Array.isArray(value) ? value.join(',') : String(value)}`];
  const o = value as Record<string, unknown>;
  return Object.keys(o)
    .sort()
    .flatMap((key) => flatten(o[key], prefix ? `${prefix}.${key}` : key));
}

async function status(options: CommonOptions): Promise<void> {
  const config: Config = cliConfig(options);
  const exists = vaultExists(config);
  const vault = exists ? await openConfiguredVault(config) : missingVault(config.dbPath);
  try {
    const tool = createRecoveryTool({
      vault,
      config,
      status: async () => ({
        db_path: vaultLocation(config),
        db_engine: config.dbUrl === '' ? 'sqlite' : 'postgres',
        vault_exists: exists,
      }),
    });
    const result = await recover(tool, { action: 'status' });
    if (options.json) return await writeJson(result);
    await writeOut(`${flatten(result).join('\n')}\n`);
  } finally {
    if (exists) await vault.close();
  }
}

/** `token-terminator status`: mode, vault usage and limits (never creates a vault). */
export function registerStatus(program: Command): void {
  withCommonOptions(program.command('status').description('show mode, vault usage and limits')).action(status);
}
