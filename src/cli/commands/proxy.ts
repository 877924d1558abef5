import cluster from 'node:cluster';
import { Option, type Command } from 'commander';
import type { Config } from '../../config/types.js';
import { loadProxyConfig, workerShare, type ProxyFlags } from '../../config/proxy.js';
import { ConfigError } from '../../errors.js';
import { vaultLocation } from '../../vault/configured.js';
import { cliConfig } from '../context.js';
import { servePrimary, STOP_MESSAGE } from './proxy-workers.js';

/** The gateway's settings (flags named as its config fields), plus the store and the log. */
type ProxyCliOptions = ProxyFlags & { db?: string; dbUrl?: string; quiet?: boolean };

/** The Terminator config for the proxy: environment plus `--db` (SQLite file) or `--db-url` (PostgreSQL). */
export function proxyTerminatorConfig(
  options: Pick<ProxyCliOptions, 'db' | 'dbUrl'>,
  env: Readonly<Record<string, string | undefined>> = process.env,
): Config {
  if (options.db !== undefined && options.dbUrl !== undefined)
    throw new ConfigError('--db and --db-url are mutually exclusive: pick the SQLite file or the PostgreSQL URL');
  return cliConfig(options, env);
}

async function proxy(options: ProxyCliOptions): Promise<void> {
  // Every other option is a gateway setting of the same name (an undefined one is not given).
  const { db: _db, dbUrl: _dbUrl, quiet: _quiet, ...flags } = options;
  const settings = loadProxyConfig({ env: process.env, flags });
  const config = proxyTerminatorConfig(options);
  const banner = (url: string): string =>
    `token-terminator proxy listening on ${url} (OpenAI: ${settings.upstream}, Anthropic: ${settings.anthropicUpstream}, vault: ${vaultLocation(config)}, mode: ${config.mode}, workers: ${settings.workers})\n` +
    `  OPENAI_BASE_URL=${url}/v1   ANTHROPIC_BASE_URL=${url}\n`;
  const write = (record: object): void => void process.stderr.write(`${JSON.stringify(record)}\n`);
  // Every worker count serves from forked workers, one too: a worker starts with the heap limit
  // and malloc setting of its share, which a process cannot give itself once running.
  const share = workerShare(settings);
  if (cluster.isPrimary) {
    // Migrations run once here, not raced by every worker opening the store at once.
    await prepareStore(config);
    process.exitCode = await servePrimary({
      workers: settings.workers,
      maxMemoryBytes: share.maxMemoryBytes,
      banner,
      log: write,
    });
    return;
  }
  // Quiet drops the line per request; a warning (a fail-open, a slow client closed) still says why.
  const log = (record: { readonly level?: unknown }): void => {
    if (options.quiet !== true || record.level !== 'info') write(record);
  };
  const { createProxy } = await import('../../../adapters/proxy/index.js');
  const { dashboardRoute } = await import('../../report/dashboard.js');
  const server = await createProxy({
    // A worker serves with its share of the gateway's memory (the same flags gave it the totals).
    config: share,
    terminatorOptions: { config },
    // The primary relays every worker's metrics: /metrics answers for the whole gateway.
    clusterMetrics: true,
    log,
  });
  server.route('/dashboard', dashboardRoute(server.terminator, server.metrics));
  try {
    await server.listen();
  } catch (error) {
    await server.close();
    // A worker's IPC channel would keep it alive: let it exit (its primary reports it).
    if (process.connected) process.disconnect();
    throw error;
  }
  // The primary prints the banner once for all workers.
  await new Promise<void>((resolve) => {
    const onMessage = (message: unknown): void => {
      if (message === STOP_MESSAGE) stop();
    };
    const stop = (): void => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      process.off('message', onMessage);
      process.off('disconnect', stop);
      void server.close().then(resolve, resolve);
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
    // Asked by the primary, or the primary is gone.
    process.on('message', onMessage);
    process.on('disconnect', stop);
  });
  if (process.connected) process.disconnect();
}

/** Open and close the store once: its migrations run before several processes open it. */
async function prepareStore(config: Config): Promise<void> {
  const { createVault, vaultOptionsFromConfig } = await import('../../vault/index.js');
  try {
    const vault = await createVault(vaultOptionsFromConfig(config));
    await vault.close();
  } catch (error) {
    // A store that cannot be opened is each worker's to report (they come up passing through).
    if (error instanceof ConfigError) throw error;
  }
}

/** `token-terminator proxy`: the OpenAI- and Anthropic-compatible gateway. */
export function registerProxy(program: Command): void {
  program
    .command('proxy')
    .description(
      'serve the OpenAI (Chat Completions, Responses) and Anthropic (Messages) APIs through the pipeline and forward to the real provider',
    )
    .option('--port <port>', 'port to listen on (TOKEN_TERMINATOR_PROXY_PORT, default 8787; 0 = any free port)')
    .option(
      '--host <host>',
      'address to bind (TOKEN_TERMINATOR_PROXY_HOST, default 127.0.0.1; any other needs --token)',
    )
    .option(
      '--upstream <url>',
      'OpenAI-compatible upstream (TOKEN_TERMINATOR_PROXY_UPSTREAM, default https://api.openai.com)',
    )
    .option(
      '--anthropic-upstream <url>',
      'Anthropic upstream (TOKEN_TERMINATOR_PROXY_ANTHROPIC_UPSTREAM, default https://api.anthropic.com)',
    )
    .option('--token <secret>', 'proxy token clients send as x-token-terminator-token (TOKEN_TERMINATOR_PROXY_TOKEN)')
    .option(
      '--max-body-bytes <n>',
      'larger request bodies pass through unreduced (TOKEN_TERMINATOR_PROXY_MAX_BODY_BYTES, default 33554432)',
    )
    .option(
      '--body-memo-bytes <n>',
      'memory for recent request bodies kept for reuse, each counted at twice its bytes (its bytes and its parse), over all workers (TOKEN_TERMINATOR_PROXY_BODY_MEMO_BYTES, default a sixteenth of --max-memory-bytes, at most 268435456; 0 = off)',
    )
    .option(
      '--recovery-rounds <n>',
      'recovery rounds answered per request (TOKEN_TERMINATOR_PROXY_RECOVERY_ROUNDS, default 3; 0 = never)',
    )
    .option(
      '--upstream-timeout-ms <ms>',
      'upstream headers/body timeout (TOKEN_TERMINATOR_PROXY_UPSTREAM_TIMEOUT_MS, default 600000)',
    )
    .option(
      '--request-timeout-ms <ms>',
      'whole request (headers and body) must arrive within this (TOKEN_TERMINATOR_PROXY_REQUEST_TIMEOUT_MS, default 120000)',
    )
    .option(
      '--min-body-rate <bytes/s>',
      'slowest request body accepted, over each 10 s (TOKEN_TERMINATOR_PROXY_MIN_BODY_RATE, default 1024; 0 = off)',
    )
    .option(
      '--max-in-flight <n>',
      'requests served at once per process, 503 + Retry-After beyond (TOKEN_TERMINATOR_PROXY_MAX_IN_FLIGHT, default 256)',
    )
    .option(
      '--max-memory-bytes <n>',
      'resident size of the whole gateway, primary and workers (TOKEN_TERMINATOR_PROXY_MAX_MEMORY_BYTES, default 1073741824, or 134217728 + 402653184 per worker when more)',
    )
    .option(
      '--workers <n>',
      'processes serving on one port, sharing the store, each with a V8 helper-thread pool of cores / n (1 to 4) unless Node is given --v8-pool-size (TOKEN_TERMINATOR_PROXY_WORKERS, default: available cores)',
    )
    .addOption(
      new Option(
        '--db <path>',
        'SQLite vault file (default: TOKEN_TERMINATOR_DB_PATH or <data dir>/artifacts.sqlite3)',
      ).conflicts('dbUrl'),
    )
    .addOption(new Option('--db-url <url>', 'PostgreSQL store URL (TOKEN_TERMINATOR_DB_URL)').conflicts('db'))
    .option('--quiet', 'no per-request log lines on stderr (warnings still)')
    .action((options: ProxyCliOptions) => proxy(options));
}
