/**
 * Settings of `token-terminator proxy`: flags beat `TOKEN_TERMINATOR_PROXY_*` variables, which
 * beat the defaults. Like the rest of the configuration, an invalid value is a ConfigError naming
 * the flag or variable, the accepted range and the value received; nothing is clamped.
 *
 * Each setting's flag is its key in kebab case and its variable `TOKEN_TERMINATOR_PROXY_` and the key in
 * upper snake case (`maxBodyBytes`: `--max-body-bytes`, TOKEN_TERMINATOR_PROXY_MAX_BODY_BYTES); defaults
 * are on {@link ProxyConfig}'s fields.
 */
import { isIP } from 'node:net';
import { availableParallelism } from 'node:os';
import { ConfigError } from '../errors.js';

/** The proxy's resolved settings. */
export interface ProxyConfig {
  /** Interface to listen on (`--host`, TOKEN_TERMINATOR_PROXY_HOST). @defaultValue `'127.0.0.1'` */
  readonly host: string;
  /** Port to listen on; 0 picks any free port (`--port`, TOKEN_TERMINATOR_PROXY_PORT). @defaultValue `8787` */
  readonly port: number;
  /** Where OpenAI-format requests go (`--upstream`). @defaultValue `'https://api.openai.com'` */
  readonly upstream: string;
  /** Where Anthropic Messages requests go (`--anthropic-upstream`). @defaultValue `'https://api.anthropic.com'` */
  readonly anthropicUpstream: string;
  /**
   * Shared secret clients send as `x-token-terminator-token` (undefined: none required; a host that
   * is not loopback requires one).
   *
   * @defaultValue `undefined`
   */
  readonly token: string | undefined;
  /** Largest body reduced; larger ones pass unreduced (`--max-body-bytes`). @defaultValue `33_554_432` (32 MiB) */
  readonly maxBodyBytes: number;
  /**
   * Memory for recent request bodies, so the next body of a session is parsed only past the items it
   * shares with the previous one (`--body-memo-bytes`; 0 = off). A body counts at twice its bytes
   * (bytes and parse). Over the whole gateway: each worker keeps its share ({@link processShare}).
   *
   * @defaultValue a sixteenth of `maxMemoryBytes`, at most `268_435_456` (256 MiB)
   */
  readonly bodyMemoBytes: number;
  /** Recovery rounds the proxy answers itself per client request, 0 = none (`--recovery-rounds`). @defaultValue `3` */
  readonly recoveryRounds: number;
  /**
   * How long the proxy waits for an upstream response's headers, and between its body chunks
   * (`--upstream-timeout-ms`).
   *
   * @defaultValue `600_000` (10 minutes)
   */
  readonly upstreamTimeoutMs: number;
  /**
   * How long a client may take to send one whole request, headers and body
   * (`--request-timeout-ms`); past it the connection is answered 408 and closed. The response
   * (a stream may run for minutes) is not counted: the upstream timeout applies to it.
   *
   * @defaultValue `120_000` (2 minutes)
   */
  readonly requestTimeoutMs: number;
  /**
   * Slowest a request body may arrive, in bytes per second over each 10-second window
   * (`--min-body-rate`); a connection sending slower is answered 408 and closed. Windows in which
   * the proxy itself was not reading (its buffer full) do not count. 0 turns the floor off.
   *
   * @defaultValue `1024`
   */
  readonly minBodyRate: number;
  /**
   * Requests one proxy process serves at once (`--max-in-flight`); one more is answered 503 with
   * `Retry-After` at once. `/healthz` and `/metrics` are not counted.
   *
   * @defaultValue `256`
   */
  readonly maxInFlight: number;
  /**
   * Resident size the whole gateway stays under (`--max-memory-bytes`): the CLI's primary (counted at
   * {@link PRIMARY_MEMORY_BYTES}) and its workers, each with an equal share of the rest
   * ({@link workerShare}); `createProxy` holds its one process under it. How a process sizes its
   * caches from its share: docs/gateway.md ("What a client can hold").
   *
   * @defaultValue `1_073_741_824` (1 GiB), or 128 MiB + 384 MiB per worker when that is more
   */
  readonly maxMemoryBytes: number;
  /**
   * Processes `token-terminator proxy` forks to serve on one port, sharing the store (`--workers`),
   * 1 included. `createProxy` ignores it (one proxy is one process).
   *
   * @defaultValue `os.availableParallelism()`
   */
  readonly workers: number;
}

/** Proxy settings given as flags (strings or numbers, as a command line has them), over the environment. */
export type ProxyFlags = { readonly [K in keyof ProxyConfig]?: string | number | undefined };

interface Setting {
  readonly key: keyof ProxyConfig;
  readonly flag: string;
  readonly env: string;
  readonly fallback: string | number | undefined | (() => number);
  readonly parse: (raw: string | number) => string | number | undefined;
  readonly expects: string;
}

/** An integer setting in min…max: its parser, and the range its error names. */
const integer = (min: number, max: number, unit = ''): Pick<Setting, 'parse' | 'expects'> => ({
  parse: (raw) => {
    const n = typeof raw === 'number' ? raw : /^\d+$/.test(raw.trim()) ? Number(raw.trim()) : Number.NaN;
    return Number.isSafeInteger(n) && n >= min && n <= max ? n : undefined;
  },
  expects: `an integer in ${min}…${max}${unit}`,
});

function url(raw: string | number): string | undefined {
  if (typeof raw !== 'string') return undefined;
  try {
    const u = new URL(raw.trim());
    // No query, fragment or credentials.
    const bare = u.search + u.hash + u.username + u.password === '';
    return /^https?:$/.test(u.protocol) && bare ? `${u.origin}${u.pathname.replace(/\/+$/, '')}` : undefined;
  } catch {
    return undefined;
  }
}

function host(raw: string | number): string | undefined {
  if (typeof raw !== 'string') return undefined;
  const h = raw.trim();
  return h === 'localhost' || isIP(h) !== 0 || /^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$/.test(h)
    ? h
    : undefined;
}

function secret(raw: string | number): string | undefined {
  if (typeof raw !== 'string') return undefined;
  const t = raw.trim();
  return t.length >= 16 && t.length <= 512 && /^[\x21-\x7e]+$/.test(t) ? t : undefined;
}

const P = 'TOKEN_TERMINATOR_PROXY_';
/** 256 MiB: below it a process has no room beside Node itself, the tokenizer and the store. */
const MIN_MEMORY = 268_435_456;
/** What the primary of `token-terminator proxy` is counted at in `maxMemoryBytes`: it serves nothing. */
export const PRIMARY_MEMORY_BYTES = 134_217_728;
/** Per worker in the default `maxMemoryBytes` when more workers than 1 GiB has room for. */
const WORKER_MEMORY_DEFAULT = 402_653_184;
const BODY_MEMO_DEFAULT = 268_435_456;
const URL_EXPECTS = 'an http(s) URL without query, fragment or credentials';

/** A setting whose flag and variable are its key in kebab-case and upper snake case. */
function setting(
  key: keyof ProxyConfig,
  fallback: Setting['fallback'],
  check: Pick<Setting, 'parse' | 'expects'>,
): Setting {
  const words = key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
  return { key, flag: `--${words}`, env: P + words.replace(/-/g, '_').toUpperCase(), fallback, ...check };
}

const SETTINGS: readonly Setting[] = [
  setting('host', '127.0.0.1', { parse: host, expects: 'a host name or IP address' }),
  setting('port', 8787, integer(0, 65_535)),
  setting('upstream', 'https://api.openai.com', { parse: url, expects: URL_EXPECTS }),
  setting('anthropicUpstream', 'https://api.anthropic.com', { parse: url, expects: URL_EXPECTS }),
  setting('token', undefined, { parse: secret, expects: 'a printable secret of 16…512 characters without spaces' }),
  setting('maxBodyBytes', 33_554_432, integer(1024, 2 ** 31)),
  setting('bodyMemoBytes', BODY_MEMO_DEFAULT, integer(0, 2 ** 40)),
  setting('recoveryRounds', 3, integer(0, 20)),
  setting('upstreamTimeoutMs', 600_000, integer(1000, 3_600_000)),
  setting('requestTimeoutMs', 120_000, integer(1000, 3_600_000)),
  setting('minBodyRate', 1024, integer(0, 2 ** 30, ' (bytes per second)')),
  setting('maxInFlight', 256, integer(1, 100_000)),
  setting('maxMemoryBytes', 1_073_741_824, integer(MIN_MEMORY, 2 ** 40)), // raised below for many workers
  setting('workers', () => availableParallelism(), integer(1, 1024)),
];

/** Each of `workers` processes' share of the gateway's totals, as a one-worker config. */
function split(config: ProxyConfig, workers: number): ProxyConfig {
  return Object.freeze({
    ...config,
    workers: 1,
    maxMemoryBytes: Math.floor((config.maxMemoryBytes - PRIMARY_MEMORY_BYTES) / workers),
    bodyMemoBytes: Math.floor(config.bodyMemoBytes / workers),
  });
}

function checkShare(memory: number, workers: number): void {
  if (Math.floor((memory - PRIMARY_MEMORY_BYTES) / workers) < MIN_MEMORY)
    throw new ConfigError(
      `--max-memory-bytes (${P}MAX_MEMORY_BYTES) ${memory} is the whole gateway's: less the primary's ${PRIMARY_MEMORY_BYTES} it leaves ${workers === 1 ? 'the worker' : `each of ${workers} workers`} under ${MIN_MEMORY}; raise it to at least ${PRIMARY_MEMORY_BYTES + workers * MIN_MEMORY}${workers === 1 ? '' : ` or lower --workers (${P}WORKERS)`}`,
    );
}

/**
 * The settings each worker of `token-terminator proxy` serves with (the command always forks
 * workers, `--workers 1` too): `maxMemoryBytes` less the primary's {@link PRIMARY_MEMORY_BYTES} and
 * `bodyMemoBytes`, each divided by `workers`; `workers` 1. `createProxy` uses {@link processShare}.
 *
 * @throws ConfigError when a worker's share would be under 256 MiB.
 * @example
 * workerShare(loadProxyConfig({ env: {}, flags: { workers: 1 } })).maxMemoryBytes; // 939524096
 */
export function workerShare(config: ProxyConfig): ProxyConfig {
  const workers = Math.max(1, config.workers);
  checkShare(config.maxMemoryBytes, workers);
  return split(config, workers);
}

/**
 * The settings one serving process runs with: the config itself with one worker; with N > 1
 * workers each one's share as {@link workerShare} computes it.
 *
 * @example
 * processShare(loadProxyConfig({ env: {}, flags: { workers: 2 } })).maxMemoryBytes; // 469762048
 */
export function processShare(config: ProxyConfig): ProxyConfig {
  return config.workers <= 1 ? config : split(config, config.workers);
}

/**
 * Every variable the proxy settings read.
 *
 * @example
 * import { PROXY_VARIABLES } from 'token-terminator/adapters/proxy';
 * PROXY_VARIABLES.includes('TOKEN_TERMINATOR_PROXY_PORT'); // true
 */
export const PROXY_VARIABLES: readonly string[] = Object.freeze(SETTINGS.map((s) => s.env));

/**
 * True for addresses only this machine can reach.
 *
 * @example
 * isLoopbackHost('127.0.0.1'); // true
 */
export function isLoopbackHost(h: string): boolean {
  return h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/**
 * Resolve the proxy settings.
 *
 * @throws ConfigError naming the flag or variable.
 * @example
 * const settings = loadProxyConfig({ env: process.env, flags: { port: '9000' } });
 */
export function loadProxyConfig(
  options: { env?: Readonly<Record<string, string | undefined>>; flags?: ProxyFlags } = {},
): ProxyConfig {
  const env = options.env ?? process.env;
  const flags = options.flags ?? {};
  const out: Record<string, unknown> = {};
  const given = new Set<keyof ProxyConfig>();
  for (const s of SETTINGS) {
    const flag = flags[s.key];
    const fromEnv = env[s.env];
    const [raw, label] =
      flag !== undefined
        ? [flag, s.flag]
        : fromEnv !== undefined && fromEnv.trim() !== ''
          ? [fromEnv, s.env]
          : [undefined, undefined];
    if (raw === undefined || label === undefined) {
      out[s.key] = typeof s.fallback === 'function' ? s.fallback() : s.fallback;
      continue;
    }
    given.add(s.key);
    const value = s.parse(raw);
    if (value === undefined) {
      const shown = s.key === 'token' ? '(hidden)' : JSON.stringify(raw);
      throw new ConfigError(`${label} must be ${s.expects}, got ${shown}`);
    }
    out[s.key] = value;
  }
  const workers = out['workers'] as number;
  if (!given.has('maxMemoryBytes') && workers > 1)
    out['maxMemoryBytes'] = Math.max(
      out['maxMemoryBytes'] as number,
      PRIMARY_MEMORY_BYTES + workers * WORKER_MEMORY_DEFAULT,
    );
  const memory = out['maxMemoryBytes'] as number;
  if (workers > 1) checkShare(memory, workers);
  if (!given.has('bodyMemoBytes')) out['bodyMemoBytes'] = Math.min(BODY_MEMO_DEFAULT, Math.floor(memory / 16));
  else if ((out['bodyMemoBytes'] as number) > memory / 2)
    throw new ConfigError(
      `--body-memo-bytes (${P}BODY_MEMO_BYTES) ${String(out['bodyMemoBytes'])} is more than half of --max-memory-bytes (${P}MAX_MEMORY_BYTES) ${memory}: raise the memory bound or lower the memo`,
    );
  const config = Object.freeze(out) as unknown as ProxyConfig;
  if (!isLoopbackHost(config.host) && config.token === undefined) {
    throw new ConfigError(
      `--host ${config.host} (${P}HOST) is not a loopback address: set a proxy token with --token or ${P}TOKEN, which clients send as x-token-terminator-token`,
    );
  }
  return config;
}
