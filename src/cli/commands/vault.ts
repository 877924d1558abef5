import type { Command } from 'commander';
import { copyVault } from '../../vault/migrate.js';
import { redactUrl } from '../../vault/configured.js';
import { isPostgresUrl } from '../../vault/create.js';
import { CliError, writeJson, writeOut } from '../context.js';

interface MigrateOptions {
  from?: string;
  to?: string;
  json?: boolean;
}

const shown = (location: string): string => (isPostgresUrl(location) ? redactUrl(location) : location);

async function migrate(options: MigrateOptions): Promise<void> {
  const { from, to } = options;
  if (from === undefined || to === undefined)
    throw new CliError('vault migrate needs --from <path|url> and --to <url|path>');
  if (from === to) throw new CliError('vault migrate: --from and --to name the same store');
  const progress = (done: number, total: number): void =>
    void process.stderr.write(`\rcopied ${done}/${total} artifacts`);
  const report = await copyVault(from, to, options.json === true ? {} : { onProgress: progress });
  if (options.json !== true) process.stderr.write('\n');
  const ok = report.mismatches.length === 0 && report.verified === report.artifacts;
  if (options.json === true) await writeJson({ from: shown(from), to: shown(to), ok, ...report });
  else {
    const rows = Object.entries(report.rows)
      .map(([t, n]) => `${t} ${n}`)
      .join(', ');
    await writeOut(
      `${shown(from)} → ${shown(to)}\n` +
        `artifacts: ${report.artifacts} (${report.alreadyThere} already there), ${report.bytes} bytes; verified by hash: ${report.verified}/${report.artifacts}\n` +
        `rows: ${rows}\n`,
    );
  }
  if (!ok)
    throw new CliError(
      `vault migrate: ${report.mismatches.length} artifacts failed verification on the target (first: ${report.mismatches.slice(0, 5).join(', ')})`,
      1,
    );
}

/** `token-terminator vault migrate --from PATH --to URL`: copy a vault (SQLite → PostgreSQL, or back) and verify every artifact. */
export function registerVault(program: Command): void {
  const vault = program.command('vault').description('manage the vault store');
  vault
    .command('migrate')
    .description(
      'copy every row of a vault into another store (a SQLite file into PostgreSQL, or back), then verify every artifact by hash',
    )
    .requiredOption('--from <path|url>', 'the vault to read: a SQLite file or a postgres:// URL')
    .requiredOption('--to <url|path>', 'the store to fill: a postgres:// URL or a SQLite file (created if needed)')
    .option('--json', 'print machine-readable JSON')
    .action((options: MigrateOptions) => migrate(options));
}
