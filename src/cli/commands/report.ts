import { existsSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Command } from 'commander';
import { definedFields } from '../../options.js';
import { cliConfig, CliError, readJson, writeOut } from '../context.js';
import { samplePath } from '../sample.js';

interface ReportCliOptions {
  db?: string;
  from?: string;
  eval?: string;
  out: string;
  title?: string;
  sample?: boolean;
}

async function report(options: ReportCliOptions): Promise<void> {
  if ([options.db, options.from, options.sample].filter((o) => o !== undefined).length > 1)
    throw new CliError('report: give one of --db, --from and --sample, not both or all three');
  // The chart library loads only for this command, so the other commands start as fast as before.
  const { parseQualityResults, parseReportInput, rateCardFromConfig, readVaultFigures, renderReport } =
    await import('../../report/index.js');
  const config = cliConfig(options.db === undefined ? {} : { db: options.db });
  const rateCard = rateCardFromConfig(config);
  let figures;
  let source: string;
  if (options.from !== undefined) {
    figures = parseReportInput(readJson(options.from, 'replay figures (replay --json)'));
    source = 'replay figures';
  } else if (options.sample === true) {
    // What `replay --sample --json --series` prints, made here (a temp vault, removed afterwards).
    const { readSessions, replaySessions } = await import('../../replay/index.js');
    const replayed = await replaySessions(await readSessions(samplePath(), Infinity), { series: true });
    figures = parseReportInput(JSON.parse(JSON.stringify(replayed)) as unknown);
    source = 'a replay of the sample session the package ships';
  } else {
    if (config.dbPath === ':memory:' || !existsSync(config.dbPath))
      throw new CliError(
        `no vault at ${config.dbPath} (set --db, TOKEN_TERMINATOR_DB_PATH, or use --from replay.json)`,
      );
    figures = readVaultFigures(config.dbPath);
    source = 'the vault\u2019s metrics rows';
  }
  const quality =
    options.eval === undefined ? undefined : parseQualityResults(readJson(options.eval, 'eval results (eval --out)'));
  const html = renderReport(figures, { source, ...definedFields({ title: options.title, quality, rateCard }) });
  const out = resolve(options.out);
  writeFileSync(out, html, { mode: 0o644 });
  const n = figures.sessions.length;
  await writeOut(
    `report: ${figures.requests} request${figures.requests === 1 ? '' : 's'} in ${n} session${n === 1 ? '' : 's'} → ${out}\n`,
  );
}

/** `token-terminator report`: one self-contained HTML page of what the pipeline saved and kept. */
export function registerReport(program: Command): void {
  program
    .command('report')
    .description(
      'write one self-contained HTML report (charts, fidelity, recovery, per-session table) from replay figures or the vault',
    )
    .option(
      '--db <path>',
      'vault whose metrics rows to chart (default: TOKEN_TERMINATOR_DB_PATH or <data dir>/artifacts.sqlite3)',
    )
    .option('--from <replay.json>', 'figures printed by `replay --json --series` instead of the vault')
    .option('--sample', 'replay the sample session the package ships and chart that')
    .option('--eval <results.json>', 'add the answer-quality section from `eval --out`')
    .option('--out <file>', 'the HTML file to write', 'report.html')
    .option('--title <text>', 'page title')
    .action((options: ReportCliOptions) => report(options));
}
