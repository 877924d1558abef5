import Table from 'cli-table3';
import type { Command } from 'commander';
import { vaultLocation } from '../../vault/configured.js';
import { withCommonOptions, withVault, writeJson, writeOut, type CommonOptions } from '../context.js';

const plain = { head: [], border: [] };
const int = (n: number): string => n.toLocaleString('en-US');
const count = (n: number, noun: string): string => `${int(n)} ${noun}${n === 1 ? '' : 's'}`;
/** "12.50 % fewer", or "3.10 % more: …" when the reduction cost more than it saved (never "−n % fewer"). */
const change = (pct: number): string =>
  pct < 0
    ? `${Math.abs(pct).toFixed(2)} % more: the reduction cost more than it saved (recovery rounds or restored content)`
    : `${pct.toFixed(2)} % fewer`;

async function stats(options: CommonOptions): Promise<void> {
  // Zeros for a vault that is not there would read as "nothing was saved": withVault says it is missing.
  const [s, where] = await withVault(options, async (vault, config) => [
    await vault.metricsSummary(),
    vaultLocation(config),
  ]);
  if (options.json === true) return writeJson({ db_path: where, ...s });
  const totals = new Table({ head: ['figure', 'raw', 'final', ''], style: plain });
  totals.push(
    ['requests', int(s.requests), '', count(s.sessions, 'session')],
    ['chars', int(s.raw_chars), int(s.final_chars), ''],
    ['tokens', int(s.raw_tokens), int(s.final_tokens), change(s.reduction_pct)],
    ['receipts', '', int(s.receipts), count(s.failed_open_requests, 'failed-open request')],
  );
  const stages = new Table({ head: ['mechanism', 'saved chars'], style: plain });
  for (const [stage, chars] of Object.entries(s.saved_by_stage).sort((a, b) => b[1] - a[1]))
    stages.push([stage, int(chars)]);
  const parts = new Table({ head: ['component', 'raw tokens', 'final tokens', 'share of raw'], style: plain });
  for (const [name, c] of Object.entries(s.components))
    parts.push([name, int(c.raw_tokens), int(c.final_tokens), `${c.raw_pct.toFixed(2)} %`]);
  await writeOut(`vault: ${where}\n${totals.toString()}\n${stages.toString()}\n${parts.toString()}\n`);
}

/** `token-terminator stats`: content-free request metrics of the vault (totals, per mechanism, per component). */
export function registerStats(program: Command): void {
  withCommonOptions(
    program.command('stats').description('sums of the content-free request metrics in the vault'),
  ).action((options: CommonOptions) => stats(options));
}
