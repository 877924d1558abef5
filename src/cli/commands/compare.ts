import { existsSync } from 'node:fs';
import type { Command } from 'commander';
import { effectiveLedgerPath, loadConfig, MODES } from '../../config/index.js';
import { definedFields } from '../../options.js';
import { openLedger } from '../../telemetry/ledger.js';
import { CliError, writeJson, writeOut } from '../context.js';

interface CompareOptions {
  ledger?: string;
  dbUrl?: string;
  experiment?: string;
  json?: boolean;
}

const num = (x: number | null): string => (x === null ? 'n/a' : String(x));

async function compare(a: string, b: string, options: CompareOptions): Promise<void> {
  for (const m of [a, b])
    if (!(MODES as readonly string[]).includes(m))
      throw new CliError(`unknown mode "${m}" (accepted: ${MODES.join(', ')})`);
  if (a === b) throw new CliError('comparison modes must differ');
  if (options.ledger !== undefined && options.dbUrl !== undefined)
    throw new CliError('compare: give --ledger or --db-url, not both');
  const config = loadConfig({
    env: process.env,
    overrides: definedFields({ ledgerPath: options.ledger, dbUrl: options.dbUrl }),
  });
  // With --db-url (or TOKEN_TERMINATOR_DB_URL) the ledger is in that database, unless --ledger names a file.
  const url = options.ledger === undefined ? config.dbUrl : '';
  const path = effectiveLedgerPath(config);
  if (url === '' && !existsSync(path))
    throw new CliError(`no experiment ledger at ${path} (set --ledger or TOKEN_TERMINATOR_LEDGER_PATH)`);
  const ledger = await openLedger(url !== '' ? { url } : { path });
  try {
    const c = await ledger.compare(a, b, { experiment: options.experiment ?? config.experiment });
    if (options.json === true) return await writeJson(c);
    const lines = [
      `experiment ${c.experiment}: ${a} vs ${b} (excluded contaminated sessions: ${c.excludedContaminatedSessions})`,
      ...[c.a, c.b].map(
        (s) =>
          `  ${s.mode.padEnd(10)} sessions ${s.sessions}, turns ${s.turns}, total tokens mean ${num(s.meanTotalTokens)} median ${num(s.medianTotalTokens)}`,
      ),
      c.delta.available
        ? `  delta (${b} − ${a}): mean ${num(c.delta.meanTotalTokens)}, median ${num(c.delta.medianTotalTokens)}`
        : '  delta: not available (a mode has no eligible session)',
      `  matched turns: ${c.matchedTurns.pairs} pairs, mean delta ${num(c.matchedTurns.meanDelta)}, median delta ${num(c.matchedTurns.medianDelta)}`,
      ...c.notes.map((n) => `  note: ${n}`),
    ];
    await writeOut(`${lines.join('\n')}\n`);
  } finally {
    await ledger.close();
  }
}

/** `token-terminator compare <modeA> <modeB>`: the experiment ledger's mode comparison. */
export function registerCompare(program: Command): void {
  program
    .command('compare')
    .description('compare two modes on the sessions of the experiment ledger (contaminated sessions excluded)')
    .argument('<modeA>')
    .argument('<modeB>')
    .option('--ledger <path>', 'ledger file (default: TOKEN_TERMINATOR_LEDGER_PATH or <data dir>/experiments.sqlite3)')
    .option('--db-url <url>', 'PostgreSQL store holding the ledger (default: TOKEN_TERMINATOR_DB_URL)')
    .option('--experiment <name>', 'experiment name (default: TOKEN_TERMINATOR_EXPERIMENT)')
    .option('--json', 'print machine-readable JSON')
    .action((a: string, b: string, options: CompareOptions) => compare(a, b, options));
}
