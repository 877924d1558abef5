/**
 * `createProxy`: the HTTP gateway (docs/gateway.md). node:http on our side (the proxy needs raw
 * bytes for byte-for-byte relays and per-chunk flushing for streams, nothing else a framework would
 * bring), undici to the upstream (keep-alive pool, streamed bodies, abort signals). POSTs to the
 * three API paths (with or without `/v1`) go through the pipeline; GET /healthz, GET /metrics and
 * the routes added with `proxy.route` or `routes` (such as the gateway command's /dashboard,
 * `dashboardRoute` from `token-terminator/report`) answer locally; everything else is relayed
 * untouched.
 */
import { timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { getHeapStatistics } from 'node:v8';
import { AggregatorRegistry, type Registry } from 'prom-client';
import type { Dispatcher } from 'undici';
import { loadProxyConfig, type ProxyConfig, type ProxyFlags } from '../../src/config/proxy.js';
import type { RecoveryWireFormat } from '../../src/recovery/formats.js';
import { createTerminator, type TerminatorOptions } from '../../src/runtime/index.js';
import type { Terminator } from '../../src/runtime/types.js';
import type { RequestAccount } from '../../src/telemetry/request-account.js';
import { intOption } from '../../src/options.js';
import { errorLabel } from '../../src/step.js';
import { WIRE } from '../shared/wire.js';
import { handleApi, upstreamFor } from './api.js';
import type { AccountInput, ProxyContext, ProxyLogRecord } from './context.js';
import type { ItemJsonCache } from './serialize.js';
import { createProxyMetrics, type ProxyMetrics } from './metrics.js';
import { workerMetricsRelay } from './metrics-relay.js';
import { BodyMemo } from './body.js';
import { Bounds, type HeapNow } from './bounds.js';
import { tenantOf } from './request-identity.js';
import { createUpstreamAgent, TOKEN_HEADER } from './upstream.js';

/** A local route: answer the request yourself (e.g. a dashboard page). */
export type RouteHandler = (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;

/** Options of {@link createProxy}; every field is optional. */
export interface ProxyOptions {
  /** Resolved settings. @defaultValue `loadProxyConfig({ env, flags })` */
  readonly config?: ProxyConfig;
  /** Flags over the environment when `config` is absent. @defaultValue none */
  readonly flags?: ProxyFlags;
  /**
   * Environment for the proxy settings and, without `terminator`, the Terminator's config.
   *
   * @defaultValue `process.env`
   */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /**
   * The Terminator to run requests through (the caller keeps ownership).
   *
   * @defaultValue one built from `terminatorOptions`
   */
  readonly terminator?: Terminator;
  /** Options for the Terminator the proxy builds (its own metric rows replace the runtime's). @defaultValue `{}` */
  readonly terminatorOptions?: TerminatorOptions;
  /** Upstream dispatcher. @defaultValue a keep-alive undici Agent with the configured timeout */
  readonly dispatcher?: Dispatcher;
  /** Content-free log records. @defaultValue none */
  readonly log?: (record: ProxyLogRecord) => void;
  /**
   * Extra local routes by exact path (any method). The report page is added after the proxy is
   * built, as the gateway command does: `proxy.route('/dashboard', dashboardRoute(proxy.terminator,
   * proxy.metrics))` with `dashboardRoute` from `token-terminator/report`.
   *
   * @defaultValue none
   */
  readonly routes?: Readonly<Record<string, RouteHandler>>;
  /**
   * Most answered requests whose accounting (token counts, metric row, ledger turn) may wait, and
   * at most a sixteenth of `config.maxMemoryBytes` of their bodies' bytes (client and sent; each
   * waiting request holds both bodies' objects); a request arriving while that many wait is reduced
   * once the accounting has caught up (`token_terminator_proxy_accounting_waits_total` counts those
   * waits). Nothing is dropped. The Terminator's accounting (`Terminator.account`) holds them: with
   * `terminator` given, its own `telemetryBacklog` applies instead.
   *
   * @defaultValue 128
   */
  readonly accountingBacklog?: number;
  /**
   * The resident set size, sampled for the memory bound (`config.maxMemoryBytes`).
   *
   * @defaultValue `process.memoryUsage.rss`
   */
  readonly rss?: () => number;
  /**
   * The V8 heap in use and its limit, sampled beside the resident size: above 85 % of the limit
   * the caches are emptied, above 95 % the process serves fewer requests at once.
   *
   * @defaultValue `v8.getHeapStatistics()`'s `used_heap_size` and `heap_size_limit`
   */
  readonly heap?: () => HeapNow;
  /** How often the resident size and the heap are sampled, in milliseconds. @defaultValue 1000 */
  readonly memoryCheckMs?: number;
  /** The window over which a request body must arrive at `config.minBodyRate`, in milliseconds. @defaultValue 10000 */
  readonly bodyRateWindowMs?: number;
  /**
   * This proxy is one worker of a node:cluster whose primary relays metrics
   * (`relayGatewayMetrics`, as `token-terminator proxy` does): `/metrics` and
   * {@link Proxy.gatewayMetrics} then sum every worker's values.
   *
   * @defaultValue false (this process's values)
   */
  readonly clusterMetrics?: boolean;
}

/** A running gateway built by {@link createProxy}: its HTTP server, settings, Terminator and metrics. */
export interface Proxy extends AsyncDisposable {
  readonly server: Server;
  readonly config: ProxyConfig;
  readonly terminator: Terminator;
  readonly metrics: ProxyMetrics;
  /** Listen on the configured host and port; resolves with the base URL (`http://host:port`). */
  listen(): Promise<string>;
  /**
   * The metrics of the whole gateway: every worker's values summed when this proxy is one worker
   * of several (`clusterMetrics`), else this proxy's own registry.
   */
  gatewayMetrics(): Promise<Registry>;
  /** Resolves once the accounting of every answered request (metrics, the vault's metric rows) is done. */
  settled(): Promise<void>;
  /** Add a local route (exact path, any method): the hook for pages such as `/dashboard`. */
  route(path: string, handler: RouteHandler): void;
  /** Stop listening, close connections, then the Terminator (when the proxy built it) and the upstream pool. */
  close(): Promise<void>;
}

/** The API paths (each format's endpoint, with and without `/v1`) and their format. */
const API_PATHS = new Map(
  Object.entries(WIRE).flatMap(([format, { route }]) => [
    [route.endpoint, format as RecoveryWireFormat],
    [route.endpoint.slice('/v1'.length), format as RecoveryWireFormat],
  ]),
);

function tokenMatches(expected: string, given: string | string[] | undefined): boolean {
  const value = Array.isArray(given) ? given[0] : given;
  if (value === undefined) return false;
  const a = Buffer.from(expected);
  const b = Buffer.from(value);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The accounting backlog holds at most this fraction (1/n) of the memory bound in body bytes. */
const ACCOUNT_MEMORY_SHARE = 16;

function json(res: ServerResponse, status: number, body: unknown, type = 'application/json'): void {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** The Terminator the proxy runs requests through, and whether it owns it. */
async function proxyTerminator(
  options: ProxyOptions,
  config: ProxyConfig,
  accountingBacklog: number,
): Promise<{ terminator: Terminator; owns: boolean }> {
  if (options.terminator !== undefined) return { terminator: options.terminator, owns: false };
  const terminator = await createTerminator({
    ...(options.env === undefined ? {} : { env: options.env }),
    // Per-session request state shares the memory bound (a sixteenth), unless the caller sized it.
    maxSessionBytes: Math.floor(config.maxMemoryBytes / 16),
    // Answered requests wait for their accounting (metric rows, ledger turns: the runtime's) within
    // the gateway's bounds: in number, and in their bodies' bytes.
    telemetryBacklog: accountingBacklog,
    telemetryBacklogWeight: Math.floor(config.maxMemoryBytes / ACCOUNT_MEMORY_SHARE),
    ...options.terminatorOptions,
  });
  return { terminator, owns: true };
}

/** The stages that acted on a request, as its log line names them ("compressToolResult+compileRequest"). */
function stagesOf(saved: Readonly<Record<string, number>>): string {
  return Object.keys(saved)
    .filter((k) => (saved[k] ?? 0) > 0)
    .join('+');
}

/**
 * One request's token and saving counters and its log line, from the figures the runtime's
 * accounting measured (src/telemetry/request-account.ts: raw is the client's body).
 */
function countAccount(
  metrics: ProxyMetrics,
  log: (record: ProxyLogRecord) => void,
  input: AccountInput,
  account: RequestAccount | undefined,
): void {
  if (account !== undefined) {
    metrics.tokens.inc({ api: input.format, direction: 'raw' }, account.rawTokens);
    metrics.tokens.inc({ api: input.format, direction: 'sent' }, account.sentTokens);
    if (account.recoveryTokens > 0)
      metrics.tokens.inc({ api: input.format, direction: 'recovery' }, account.recoveryTokens);
    for (const [mechanism, chars] of Object.entries(account.saved))
      if (chars > 0) metrics.saved.inc({ mechanism }, chars);
  }
  log({
    level: 'info',
    event: 'request',
    api: input.format,
    status: input.status,
    ms: input.ms,
    session: input.prepared.context.sessionId,
    tenant: input.prepared.context.tenant ?? '',
    ...(account === undefined
      ? {}
      : {
          raw_tokens: account.rawTokens,
          sent_tokens: account.sentTokens,
          recovery_tokens: account.recoveryTokens,
        }),
    recovery_rounds: input.continuations.length,
    ...(account === undefined ? {} : { stages: stagesOf(account.saved) }),
  });
}

/** A request for no local route and no API path: relayed to the upstream untouched. */
function relay(ctx: ProxyContext, req: IncomingMessage, res: ServerResponse, pathAndQuery: string): Promise<void> {
  ctx.metrics.requests.inc({ api: 'relay', outcome: 'unchanged' });
  const anthropic = pathAndQuery.startsWith('/v1/messages') || req.headers['anthropic-version'] !== undefined;
  const hasBody = req.headers['content-length'] !== undefined || req.headers['transfer-encoding'] !== undefined;
  const base = anthropic ? ctx.config.anthropicUpstream : ctx.config.upstream;
  return upstreamFor(ctx, req, res, base, pathAndQuery, 'relay').forward(hasBody ? req : null, false);
}

/** One request: health, the token check, metrics, the bounds, then a local route, an API path or the relay. */
async function handle(
  ctx: ProxyContext,
  bounds: Bounds,
  routes: ReadonlyMap<string, RouteHandler>,
  gatewayMetrics: () => Promise<Registry>,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const { config } = ctx;
  const started = performance.now();
  const pathAndQuery = req.url ?? '/';
  const path = pathAndQuery.split('?')[0] ?? '/';
  const method = req.method ?? 'GET';
  const api = method === 'POST' ? API_PATHS.get(path) : undefined;
  res.once('finish', () => {
    // An answered API request is logged by its accounting, with its figures.
    if (ctx.accounted.has(res)) return;
    ctx.log({
      level: 'info',
      event: 'request',
      api: api ?? (routes.has(path) || path === '/healthz' || path === '/metrics' ? 'local' : 'relay'),
      status: res.statusCode,
      ms: Math.round(performance.now() - started),
    });
  });
  if (method === 'GET' && path === '/healthz') return json(res, 200, { status: 'ok' });
  if (config.token !== undefined && !tokenMatches(config.token, req.headers[TOKEN_HEADER])) {
    return json(res, 401, {
      error: {
        type: 'authentication_error',
        message: `token-terminator proxy: missing or wrong ${TOKEN_HEADER} header`,
      },
    });
  }
  if (method === 'GET' && path === '/metrics') {
    const registry = await gatewayMetrics();
    return json(res, 200, await registry.metrics(), registry.contentType);
  }
  const anthropic = api === 'anthropic' || req.headers['anthropic-version'] !== undefined;
  if (!bounds.admit(req, res, anthropic, tenantOf(req.headers))) return;
  const local = routes.get(path);
  if (local !== undefined) return local(req, res);
  if (api !== undefined) return handleApi(ctx, req, res, api, pathAndQuery, started, bounds.reserve(res));
  return relay(ctx, req, res, pathAndQuery);
}

function httpServer(
  config: ProxyConfig,
  log: (record: ProxyLogRecord) => void,
  handler: (req: IncomingMessage, res: ServerResponse) => Promise<void>,
): Server {
  const server = createServer(
    {
      noDelay: true,
      keepAlive: true,
      // The whole request, headers and body, must arrive within requestTimeoutMs; node:http counts
      // until the request is complete, so a response (a stream may run for minutes) is not counted.
      requestTimeout: config.requestTimeoutMs,
      headersTimeout: Math.min(60_000, config.requestTimeoutMs),
      // How often node:http looks for connections past those timeouts.
      connectionsCheckingInterval: Math.min(1000, Math.floor(config.requestTimeoutMs / 4)),
    },
    (req, res) => {
      handler(req, res).catch((error: unknown) => {
        log({ level: 'warn', event: 'handler_failed', error: errorLabel(error) });
        if (!res.headersSent) res.destroy();
        else res.end();
      });
    },
  );
  // Longer than the idle timeout of common client pools, so a reused connection is not closed under a request.
  server.keepAliveTimeout = 65_000;
  return server;
}

function listen(server: Server, config: ProxyConfig): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => {
      server.off('error', reject);
      const address = server.address() as AddressInfo;
      const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
      resolve(`http://${host}:${address.port}`);
    });
  });
}

/** The parts of one proxy every request handler shares (ProxyContext). */
export function proxyContext(
  config: ProxyConfig,
  terminator: Terminator,
  metrics: ProxyMetrics,
  dispatcher: Dispatcher,
  log: (record: ProxyLogRecord) => void,
) {
  const logged = new Set<string>();
  return {
    config,
    terminator,
    dispatcher,
    metrics,
    // Recent request bodies, whose conversation items the next body of a session reuses (body.ts).
    // Its share of the memory bound is in config; the items and renderings each session was shown
    // are the Terminator's per-session state (a sixteenth, `maxSessionBytes`).
    bodies: new BodyMemo({
      maxBytes: config.bodyMemoBytes,
      ...(terminator.digests === undefined ? {} : { digests: terminator.digests }),
    }),
    // JSON bytes of conversation items already serialized (serialize.ts).
    itemJson: new WeakMap() as ItemJsonCache,
    recoveryRounds: config.recoveryRounds,
    // Responses whose request the accounting logs (with its figures); the server logs the others when they finish.
    accounted: new WeakSet<object>(),
    log,
    /** Log `record` the first time its event happens in this proxy (a condition an operator fixes once). */
    logOnce(record: ProxyLogRecord): void {
      if (logged.has(record.event)) return;
      logged.add(record.event);
      log(record);
    },
    account(input: AccountInput): void {
      // The bytes are counted as it is answered; its tokens wait for the accounting.
      metrics.bytes.inc({ api: input.format, direction: 'raw' }, input.rawBytes);
      metrics.bytes.inc({ api: input.format, direction: 'sent' }, input.sentBytes);
      if (input.continuationBytes > 0)
        metrics.bytes.inc({ api: input.format, direction: 'recovery' }, input.continuationBytes);
      const step = input.prepared.step;
      if (step === undefined || terminator.account === undefined) return countAccount(metrics, log, input, undefined);
      // Token counting and the rows run after the answer went out, in batches (the runtime's accounting).
      terminator.account(step, {
        sent: input.sent,
        continuations: input.continuations,
        raw: input.prepared.measured,
        weight: input.rawBytes + input.sentBytes,
        measured: ({ account, error }) => {
          if (error !== undefined) log({ level: 'warn', event: 'metrics_failed', error: errorLabel(error) });
          countAccount(metrics, log, input, account);
        },
      });
    },
    /**
     * Resolves once the accounting backlog has room: a request waits here before it is reduced while
     * the accounting of answered ones has fallen behind (memory stays bounded under sustained load).
     */
    async room(): Promise<void> {
      const wait = terminator.accountingRoom?.();
      if (wait === undefined) return;
      metrics.accountingWaits.inc();
      await wait;
    },
  };
}

/**
 * Build a proxy (not yet listening).
 *
 * @example
 * const proxy = await createProxy({ flags: { port: 8787, upstream: 'https://api.openai.com' } });
 * console.log(`listening on ${await proxy.listen()}`);
 */
export async function createProxy(options: ProxyOptions = {}): Promise<Proxy> {
  const config =
    options.config ??
    loadProxyConfig({ ...(options.env === undefined ? {} : { env: options.env }), flags: options.flags ?? {} });
  const accountingBacklog = intOption('createProxy', 'accountingBacklog', options.accountingBacklog, 128, 1);
  const memoryCheckMs = intOption('createProxy', 'memoryCheckMs', options.memoryCheckMs, 1000, 10);
  const bodyRateWindowMs = intOption('createProxy', 'bodyRateWindowMs', options.bodyRateWindowMs, 10_000, 10);
  const { terminator, owns: ownsTerminator } = await proxyTerminator(options, config, accountingBacklog);
  const ownsDispatcher = options.dispatcher === undefined;
  const dispatcher = options.dispatcher ?? createUpstreamAgent(config.upstreamTimeoutMs);
  const metrics = createProxyMetrics(() => terminator.heldState());
  const routes = new Map<string, RouteHandler>(Object.entries(options.routes ?? {}));
  const log = options.log ?? (() => undefined);
  const ctx = proxyContext(config, terminator, metrics, dispatcher, log);

  const bounds = new Bounds({
    maxInFlight: config.maxInFlight,
    minBodyRate: config.minBodyRate,
    rateWindowMs: bodyRateWindowMs,
    maxMemoryBytes: config.maxMemoryBytes,
    rss: options.rss ?? (() => process.memoryUsage.rss()),
    heap:
      options.heap ??
      (() => {
        const h = getHeapStatistics();
        return { used: h.used_heap_size, limit: h.heap_size_limit };
      }),
    memoryIntervalMs: memoryCheckMs,
    trim: () => {
      ctx.bodies.clear();
    },
    metrics,
    log,
  });
  // One worker of several: /metrics sums every worker's values, relayed by the primary (metrics-relay.ts).
  const relay =
    options.clusterMetrics === true ? workerMetricsRelay(() => metrics.registry.getMetricsAsJSON()) : undefined;
  const gatewayMetrics = async (): Promise<Registry> => {
    const sets = await relay?.gather();
    return sets === undefined || sets.length === 0
      ? metrics.registry
      : AggregatorRegistry.aggregate(sets as Parameters<typeof AggregatorRegistry.aggregate>[0]);
  };
  const server = httpServer(config, log, (req, res) => handle(ctx, bounds, routes, gatewayMetrics, req, res));

  let closed = false;
  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    bounds.stop();
    relay?.close();
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
    await terminator.settled();
    if (ownsDispatcher) await dispatcher.close().catch(() => undefined);
    if (ownsTerminator) await terminator.close();
  };

  return {
    server,
    config,
    terminator,
    metrics,
    listen: () => listen(server, config),
    gatewayMetrics,
    settled: () => terminator.settled(),
    route: (path, handler) => {
      routes.set(path, handler);
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}
