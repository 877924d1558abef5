/**
 * The upstream side: undici over one keep-alive Agent per proxy. Header rules: hop-by-hop headers
 * are dropped both ways (RFC 9110 §7.6.1), the proxy's own headers never leave it, credentials and
 * every other header go upstream untouched, and responses come back with their status, headers
 * and body as the upstream sent them.
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { Agent, type Dispatcher } from 'undici';
import { SESSION_HEADER, WINDOW_HEADER } from './request-identity.js';
import type { ProxyLogRecord } from './context.js';

/** Request header carrying the proxy's own access token; checked locally and never sent upstream. */
export const TOKEN_HEADER = 'x-token-terminator-token';

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'expect',
  'host',
]);

/** Where a path goes: the base URL's origin, its path prefix once (a base ending in `/v1` takes `/v1/...` paths as they are). */
export function upstreamTarget(base: string, pathAndQuery: string): { origin: string; path: string } {
  const u = new URL(base);
  const prefix = u.pathname.replace(/\/+$/, '');
  const rel =
    prefix !== '' &&
    (pathAndQuery === prefix || pathAndQuery.startsWith(`${prefix}/`) || pathAndQuery.startsWith(`${prefix}?`))
      ? pathAndQuery.slice(prefix.length)
      : pathAndQuery;
  return { origin: u.origin, path: `${prefix}${rel.startsWith('/') ? rel : `/${rel}`}` };
}

type HeaderMap = Readonly<Record<string, string | string[] | undefined>>;

function connectionTokens(headers: HeaderMap): Set<string> {
  const c = headers['connection'];
  const list = Array.isArray(c) ? c.join(',') : (c ?? '');
  return new Set(
    list
      .split(',')
      .map((s) => s.trim().toLowerCase())
      .filter((s) => s !== ''),
  );
}

/** `headers` without the hop-by-hop ones, those their `connection` header names, and those `drop` names, in order. */
function copyHeaders(headers: HeaderMap, drop: (name: string) => boolean): Record<string, string | string[]> {
  const named = connectionTokens(headers);
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers))
    if (value !== undefined && !HOP_BY_HOP.has(name) && !named.has(name) && !drop(name)) out[name] = value;
  return out;
}

/** Request headers for upstream (never the proxy's own). `bodyChanged`: the body is ours (its length is set by undici). */
export function requestHeaders(
  headers: IncomingHttpHeaders,
  options: { bodyChanged: boolean; identity?: boolean },
): Record<string, string | string[]> {
  const out = copyHeaders(
    headers,
    (name) =>
      name === SESSION_HEADER ||
      name === WINDOW_HEADER ||
      name === TOKEN_HEADER ||
      (options.bodyChanged && name === 'content-length'),
  );
  if (options.identity === true) out['accept-encoding'] = 'identity';
  return out;
}

/** Response headers for the client. `bodyChanged`: the body is ours (length recomputed, no encoding). */
export function responseHeaders(headers: HeaderMap, options: { bodyChanged: boolean }): OutgoingHttpHeaders {
  return copyHeaders(
    headers,
    (name) => options.bodyChanged && (name === 'content-length' || name === 'content-encoding'),
  );
}

/** One request to the upstream API. */
export interface UpstreamRequest {
  readonly base: string;
  readonly pathAndQuery: string;
  readonly method: string;
  readonly headers: Record<string, string | string[]>;
  readonly body?: Buffer | Readable | null;
  readonly signal: AbortSignal;
  /** Called with the failure's code when the request is sent a second time (see {@link sendUpstream}). */
  readonly onRetry?: (code: string) => void;
}

/** The keep-alive undici Agent the proxy sends upstream through; `timeoutMs` bounds the wait for headers and between body chunks. */
export function createUpstreamAgent(timeoutMs: number): Agent {
  return new Agent({
    keepAliveTimeout: 30_000,
    connections: 256,
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    pipelining: 1,
  });
}

/**
 * The failure's code when a failed send is the upstream closing the connection the request was
 * written on before any byte of its answer: a keep-alive connection the upstream closed while
 * idle, just as the pool reused it. `request` rejects only before the response headers, so no
 * byte of the answer has reached the client; timeouts, refused connections and aborts are not this.
 */
function closedBeforeAnswer(error: unknown): string | undefined {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  if (code === 'ECONNRESET' || code === 'EPIPE') return code;
  // undici's SocketError: 'other side closed' (FIN), 'closed'; not 'bad response' (bytes came back).
  if (code === 'UND_ERR_SOCKET' && (message === 'other side closed' || message === 'closed')) return code;
  return undefined;
}

/**
 * Send a request to `base` + `pathAndQuery` through `dispatcher`; resolves once the response
 * headers arrive. A request whose connection the upstream closed before any byte of the answer
 * ({@link closedBeforeAnswer}) is sent once more, on the connection the pool gives next (the
 * closed one is gone), when its body can be sent again (a Buffer or none, not a stream) and the
 * client is still there: the race between an upstream closing an idle keep-alive connection and
 * the pool reusing it must not reach the agent. Never more than once, never on a timeout.
 */
export async function sendUpstream(dispatcher: Dispatcher, request: UpstreamRequest): Promise<Dispatcher.ResponseData> {
  const target = upstreamTarget(request.base, request.pathAndQuery);
  const send = (): Promise<Dispatcher.ResponseData> =>
    dispatcher.request({
      origin: target.origin,
      path: target.path,
      method: request.method as Dispatcher.HttpMethod,
      headers: request.headers,
      body: request.body ?? null,
      signal: request.signal,
    });
  try {
    return await send();
  } catch (error) {
    const code = closedBeforeAnswer(error);
    const replayable = request.body === undefined || request.body === null || Buffer.isBuffer(request.body);
    if (code === undefined || !replayable || request.signal.aborted) throw error;
    request.onRetry?.(code);
    return send();
  }
}

/** Pipe an upstream response to the client as it arrives; an upstream failure mid-body resets the client connection. */
export async function relayResponse(response: Dispatcher.ResponseData, res: ServerResponse): Promise<void> {
  res.writeHead(response.statusCode, responseHeaders(response.headers, { bodyChanged: false }));
  res.flushHeaders();
  try {
    for await (const chunk of response.body) {
      if (!res.write(chunk as Buffer))
        await new Promise<void>((resolve) => res.once('drain', resolve).once('close', resolve));
      if (res.destroyed) break;
    }
    res.end();
  } catch {
    res.destroy();
  }
}

/** Read a whole upstream body (for answers the proxy must look into). */
export async function readAll(response: Dispatcher.ResponseData): Promise<Buffer> {
  return Buffer.from(await response.body.arrayBuffer());
}

/** What each network failure code means, and its answer: 502 (unreachable) or 504 (timed out); any other failure resets. */
const FAILURES: Readonly<Record<string, readonly [reason: string, status: 502 | 504]>> = {
  ECONNREFUSED: ['connection refused: nothing listens at that address', 502],
  ENOTFOUND: ['host not found (DNS)', 502],
  EAI_AGAIN: ['DNS lookup failed for now', 502],
  UND_ERR_CONNECT_TIMEOUT: ['connect timed out', 502],
  EHOSTUNREACH: ['host unreachable', 502],
  UND_ERR_HEADERS_TIMEOUT: ['no response headers in time', 504],
  UND_ERR_BODY_TIMEOUT: ['the response body stalled', 504],
};

/** The upstream's origin only: a base URL's path is harmless, but its userinfo would be a credential. */
function upstreamOrigin(base: string): string {
  try {
    const url = new URL(base);
    return `${url.protocol}//${url.host}${url.pathname === '/' ? '' : url.pathname}`;
  } catch {
    return '(invalid upstream URL)';
  }
}

/**
 * Answer a failed upstream call the way the failure looked: a reset or a dropped connection resets
 * the client's connection too; an unreachable upstream is a 502 and an upstream that never sent
 * headers a 504, each with a provider-shaped JSON error naming the upstream it called (its origin
 * and path, never userinfo) and why it failed, and a `upstream_failed` log record saying the same.
 */
export function answerUpstreamFailure(
  error: unknown,
  res: ServerResponse,
  upstream: string,
  log?: (record: ProxyLogRecord) => void,
): void {
  const code = (error as { code?: unknown })?.code;
  const where = upstreamOrigin(upstream);
  const known = typeof code === 'string' ? FAILURES[code] : undefined;
  const reason = known?.[0] ?? (typeof code === 'string' ? code : 'connection failed');
  const status = res.headersSent || res.destroyed ? undefined : known?.[1];
  log?.({
    level: 'warn',
    event: 'upstream_failed',
    upstream: where,
    code: String(code),
    reason,
    status: status ?? 'reset',
  });
  if (status === undefined) {
    res.destroy();
    return;
  }
  const body = JSON.stringify({
    error: {
      type: 'upstream_error',
      code: String(code),
      message: `token-terminator proxy: upstream ${where} ${status === 502 ? 'unreachable' : 'timed out'} (${reason}); check --upstream / --anthropic-upstream`,
    },
  });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}
