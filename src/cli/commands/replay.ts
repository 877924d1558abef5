import { existsSync } from 'node:fs';
import cliProgress from 'cli-progress';
import { Option, type Command } from 'commander';
import { MODES } from '../../config/index.js';
import { readSessions, renderFiguresTable, replaySessions, requestCount } from '../../replay/index.js';
import type { ReplayOptions } from '../../replay/replay.js';
import { definedFields } from '../../options.js';
import { CliError, integerAtLeast, numberArg, writeJson, writeOut } from '../context.js';
import { samplePath } from '../sample.js';

type ReplayCliOptions = Pick<ReplayOptions, 'mode' | 'series' | 'dump' | 'window' | 'reserve' | 'db'> & {
  limit?: number;
  json?: boolean;
  cacheReadPrice: number;
  ledger?: string;
  sample?: boolean;
};

const priceArg = numberArg((n) => n >= 0 && n <= 1, 'a number within [0, 1]');

async function replay(given: string | undefined, options: ReplayCliOptions): Promise<void> {
  if (options.reserve !== undefined && options.window === undefined)
    throw new CliError('replay: --reserve needs --window');
  if (given !== undefined && options.sample === true)
    throw new CliError('replay: give a sessions file or --sample, not both');
  if (given === undefined && options.sample !== true)
    throw new CliError('replay: give a sessions file, or --sample for the bundled one');
  const file = given ?? samplePath();
  if (!existsSync(file)) throw new CliError(`no sessions file at ${file}`);
  const sessions = await readSessions(file, options.limit ?? Infinity);
  if (sessions.length === 0) throw new CliError(`${file} holds no sessions`);
  // A request is replayed at each assistant turn: a session without one measures nothing.
  const silent = sessions.filter((s) => requestCount(s) === 0);
  if (silent.length === sessions.length)
    throw new CliError(`${file}: no session has an assistant turn, so there is no request to replay`);
  for (const s of silent)
    process.stderr.write(
      `warning: session ${JSON.stringify(s.id.slice(0, 80))} has no assistant turn and produces no request\n`,
    );
  const tty = process.stderr.isTTY === true && options.json !== true;
  const bar = tty
    ? new cliProgress.SingleBar(
        {
          format: 'replay [{bar}] {value}/{total} requests | {eta_formatted} left',
          hideCursor: true,
          clearOnComplete: true,
          stream: process.stderr,
        },
        cliProgress.Presets.shades_classic,
      )
    : undefined;
  bar?.start(
    sessions.reduce((n, s) => n + requestCount(s), 0),
    0,
  );
  let figures;
  try {
    const { mode, db, ledger, dump, series, window, reserve } = options;
    figures = await replaySessions(sessions, {
      cacheReadPrice: options.cacheReadPrice,
      ...definedFields({ mode, db, ledger, dump, series, window, reserve }),
      ...(bar === undefined ? {} : { onProgress: (done: number) => bar.update(done) }),
    });
  } finally {
    bar?.stop();
  }
  if (options.json === true) return writeJson(figures);
  await writeOut(`${renderFiguresTable(figures)}\n`);
}

/** `token-terminator replay <sessions.jsonl>`: recorded sessions through the whole pipeline, with figures. */
export function registerReplay(program: Command): void {
  program
    .command('replay')
    .description(
      'replay recorded sessions (JSONL, one {id, model?, tools?, messages} per line) through the pipeline and print the figures',
    )
    .argument('[sessions]', 'sessions file (.jsonl)')
    .option('--sample', 'replay the sample session the package ships (examples/sessions/sample.jsonl)')
    .addOption(
      new Option('--mode <mode>', 'mode to replay under (default: TOKEN_TERMINATOR_MODE or balanced)').choices(
        MODES as string[],
      ),
    )
    .option('--limit <n>', 'replay only the first n sessions', integerAtLeast(1))
    .option('--json', 'print the figures as JSON')
    .option('--series', "with --json: add each session's per-request series (per_request), the input of `report`")
    .option('--dump <file>', 'write one JSON line {session, index, final} per request')
    .option(
      '--window <tokens>',
      'budgeting window W: requests over W − R are fitted (docs/window.md); adds requests_over_window_* and window_rewrites',
      integerAtLeast(1),
    )
    .option(
      '--reserve <tokens>',
      'output reserve R with --window (default: INCONTEXT_MIN_OUTPUT_TOKENS, 4096)',
      integerAtLeast(1),
    )
    .option('--cache-read-price <price>', 'price of a cached char relative to an uncached one', priceArg, 0.1)
    .option('--db <path>', 'vault file to use and keep (default: a fresh vault in a temp dir)')
    .option('--ledger <path>', 'experiment ledger file (default: experiments.sqlite3 beside the vault)')
    .action((file: string | undefined, options: ReplayCliOptions) => replay(file, options));
}
