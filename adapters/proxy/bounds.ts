/**
 * What one client, and all of them together, can hold of a proxy process: requests in flight (and
 * each API key's fair share of them), the rate at which a body arrives, resident memory and the V8
 * heap, and the heap a reduction may claim per body byte. The rules and their figures are in
 * docs/gateway.md ("What a client can hold") and RELIABILITY.md (the gateway's rows); the numbers
 * are the constants below. The heap is watched apart from the resident size because a worker's heap
 * limit is half its share: a heap that fills its limit ends the process while the resident size is
 * still under the bound. The body rate is counted from the socket's bytes, so a window in which the
 * proxy's own buffer for the body was full (its consumer was the slow one) does not count.
 *
 * The whole-request timeout (headers and body) is node:http's own, set in server.ts.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { ProxyLogRecord } from './context.js';
import type { ProxyMetrics } from './metrics.js';

/** Settings and dependencies of {@link Bounds}. */
export interface BoundsOptions {
  readonly maxInFlight: number;
  /** Bytes per second; 0 = no floor. */
  readonly minBodyRate: number;
  readonly rateWindowMs: number;
  readonly maxMemoryBytes: number;
  /** Resident set size now. */
  readonly rss: () => number;
  /** The V8 heap now: bytes in use (live and not yet collected) and the heap limit. */
  readonly heap: () => HeapNow;
  readonly memoryIntervalMs: number;
  /** Empty the in-memory caches. */
  readonly trim: () => void;
  readonly metrics: ProxyMetrics;
  readonly log: (record: ProxyLogRecord) => void;
  /** Milliseconds on a monotonic clock (default `performance.now`); tests stall it. */
  readonly now?: () => number;
}

/**
 * A request's claim on the process's reduction budget ({@link REDUCE_SHARE} of the heap limit), from
 * before its body is read until it is released (its reduction is over, or it was forwarded unreduced).
 */
export interface Reservation {
  /** Claim `bytes` more of body; false, claiming nothing, when they do not fit. */
  take(bytes: number): boolean;
  /** Aborted when the heap nears its limit while the request is reduced: forward it as sent. */
  readonly signal: AbortSignal;
  /** Give the claim back (idempotent). */
  release(): void;
}

/** What {@link BoundsOptions.heap} reports. */
export interface HeapNow {
  readonly used: number;
  readonly limit: number;
}

interface Watched {
  readonly socket: Socket;
  readonly res: ServerResponse;
  bytes: number;
  at: number;
}

/** Share of `maxMemoryBytes` above which the caches are emptied. */
const TRIM_AT = 0.9;
/**
 * Shares of the V8 heap limit above which the caches are emptied, and above which the process
 * serves fewer requests at once. Under load a worker's heap in use (live data and garbage not yet
 * collected) peaks at about two thirds of its limit (`bench proxy-load`, two workers under the
 * default bound: 145 of 224 MiB after a full collection, 152 before).
 */
const HEAP_TRIM_AT = 0.85;
const HEAP_OVER_AT = 0.95;
/** Share of the heap limit above which the reductions running are aborted (their requests go as sent). */
export const HEAP_ABORT_AT = 0.9;
/**
 * Heap bytes one body byte is counted at while its request is reduced. Measured on one 29 MB request
 * of 15 terminal outputs of 1.9 MB (`npm run bench -- proxy-memory`, RELIABILITY.md): at most about
 * 70 MB of live heap over the idle process after full collections, 2.4 per byte, before the
 * collector's floating garbage. Too high only forwards a large request unreduced; too low is caught
 * by {@link HEAP_ABORT_AT}.
 */
export const HEAP_PER_BODY_BYTE = 3;
/**
 * Share of the V8 heap limit that the requests being reduced may claim together (the rest is the
 * live state and garbage): with the defaults of two workers (224 MiB of heap each) one request of
 * 29 MB fits (its body limit is 32 MiB), a second one at once does not.
 */
export const REDUCE_SHARE = 0.45;
/** Bodies up to this size are always reduced (claimed, but never refused): their cost is part of ordinary load. */
export const SMALL_BODY = 1_048_576;

type Refusal = 'in_flight' | 'memory' | 'tenant_share';

const REFUSED: Readonly<Record<Refusal, string>> = {
  in_flight: 'in-flight limit reached',
  memory: 'memory bound reached',
  tenant_share: "this API key holds its share of the in-flight limit; other keys' requests are served",
};

/** The 503 a request gets beyond the limit, in the error shape of the API it was for. */
function overloaded(res: ServerResponse, anthropic: boolean, reason: Refusal): void {
  const message = `token-terminator proxy: too many requests in flight (${REFUSED[reason]}); retry after 1 s`;
  const body = JSON.stringify(
    anthropic
      ? { type: 'error', error: { type: 'overloaded_error', message } }
      : { error: { type: 'server_error', code: 'proxy_overloaded', message } },
  );
  res.writeHead(503, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    'retry-after': '1',
    connection: 'close',
  });
  res.end(body);
}

/** The bounds of one proxy: created with it, stopped by its `close()`. */
export class Bounds {
  readonly #o: BoundsOptions;
  #inFlight = 0;
  /** Requests in flight per tenant (only tenants with some). */
  readonly #tenants = new Map<string, number>();
  #over = false;
  /** Heap bytes the requests being reduced claim together, of {@link #budget}. */
  #claimed = 0;
  readonly #budget: number;
  readonly #claims = new Set<{ bytes: number; abort: AbortController }>();
  readonly #bodies = new Map<IncomingMessage, Watched>();
  #rateTimer: NodeJS.Timeout | undefined;
  /** When the body sweep last ran. */
  #swept = 0;
  readonly #now: () => number;
  readonly #memoryTimer: NodeJS.Timeout;

  constructor(options: BoundsOptions) {
    this.#o = options;
    this.#now = options.now ?? (() => performance.now());
    let limit = 0;
    try {
      limit = options.heap().limit;
    } catch {
      // fail open: no budget, only small bodies are reduced
    }
    this.#budget = Math.floor(limit * REDUCE_SHARE);
    this.#memoryTimer = setInterval(() => this.#sample(), options.memoryIntervalMs);
    this.#memoryTimer.unref();
  }

  /** Requests served at once now (lower while the memory bound is exceeded). */
  get limit(): number {
    return this.#over ? Math.max(1, Math.floor(this.#o.maxInFlight / 8)) : this.#o.maxInFlight;
  }

  /**
   * Count the request in, or answer it 503 + Retry-After and return false. Counted until its
   * response closes (finished or connection gone).
   */
  admit(req: IncomingMessage, res: ServerResponse, anthropic: boolean, tenant = ''): boolean {
    const limit = this.limit;
    const held = this.#tenants.get(tenant) ?? 0;
    const reason: Refusal | undefined =
      this.#inFlight >= limit
        ? this.#over
          ? 'memory'
          : 'in_flight'
        : held >= this.#share(limit, held)
          ? 'tenant_share'
          : undefined;
    if (reason !== undefined) {
      this.#o.metrics.rejected.inc({ reason });
      overloaded(res, anthropic, reason);
      return false;
    }
    this.#inFlight++;
    this.#tenants.set(tenant, held + 1);
    this.#o.metrics.inFlight.set(this.#inFlight);
    res.once('close', () => {
      this.#inFlight--;
      const n = (this.#tenants.get(tenant) ?? 1) - 1;
      if (n === 0) this.#tenants.delete(tenant);
      else this.#tenants.set(tenant, n);
      this.#o.metrics.inFlight.set(this.#inFlight);
    });
    this.#watch(req, res);
    return true;
  }

  /** Most requests a tenant holding `held` may have in flight: the limit less an eighth alone, else an equal share. */
  #share(limit: number, held: number): number {
    const active = this.#tenants.size + (held === 0 ? 1 : 0);
    if (active <= 1) return limit - Math.floor(limit / 8);
    return Math.max(1, Math.floor(limit / active));
  }

  /**
   * A claim on the reduction budget for one request, before its body is read; released when its
   * response closes at the latest. A body of `declared` bytes (its Content-Length) is claimed at
   * once (see {@link Reservation.take}).
   */
  reserve(res: ServerResponse): Reservation {
    const claim = { bytes: 0, abort: new AbortController() };
    let released = false;
    const release = (): void => {
      if (released) return;
      released = true;
      this.#claimed -= claim.bytes;
      this.#claims.delete(claim);
    };
    res.once('close', release);
    return {
      take: (bytes) => {
        if (released) return false;
        const cost = bytes * HEAP_PER_BODY_BYTE;
        const small = (claim.bytes + cost) / HEAP_PER_BODY_BYTE <= SMALL_BODY;
        if (!small && this.#claimed + cost > this.#budget) return false;
        this.#claimed += cost;
        claim.bytes += cost;
        if (!claim.abort.signal.aborted) this.#claims.add(claim);
        return true;
      },
      signal: claim.abort.signal,
      release,
    };
  }

  /** Clear the timers (the proxy closes). */
  stop(): void {
    clearInterval(this.#memoryTimer);
    if (this.#rateTimer !== undefined) clearInterval(this.#rateTimer);
    this.#rateTimer = undefined;
    this.#bodies.clear();
  }

  #watch(req: IncomingMessage, res: ServerResponse): void {
    if (this.#o.minBodyRate === 0 || req.complete) return;
    const length = req.headers['content-length'];
    if (req.headers['transfer-encoding'] === undefined && (length === undefined || Number(length) === 0)) return;
    this.#bodies.set(req, { socket: req.socket, res, bytes: req.socket.bytesRead, at: this.#now() });
    req.once('close', () => this.#bodies.delete(req));
    if (this.#rateTimer === undefined) {
      this.#swept = this.#now();
      // Each body is checked once per full window of its own; the sweep runs twice a window.
      this.#rateTimer = setInterval(() => this.#sweep(), Math.max(1, Math.floor(this.#o.rateWindowMs / 2)));
      this.#rateTimer.unref();
    }
  }

  #sweep(): void {
    const now = this.#now();
    // A sweep half a window late means this process did not run (a long reduction, a loaded
    // machine): timers run before sockets are read, so what the clients sent meanwhile is not yet
    // counted. Judging now would close fast clients; every body starts a new window instead.
    const stalled = now - this.#swept > this.#o.rateWindowMs;
    this.#swept = now;
    for (const [req, w] of this.#bodies) {
      if (req.complete || req.destroyed) {
        this.#bodies.delete(req);
        continue;
      }
      if (stalled) {
        w.bytes = w.socket.bytesRead;
        w.at = now;
        continue;
      }
      const elapsed = now - w.at;
      if (elapsed < this.#o.rateWindowMs) continue;
      const bytes = w.socket.bytesRead;
      const received = bytes - w.bytes;
      w.bytes = bytes;
      w.at = now;
      // Our consumer has not taken what arrived: the client is not the slow one.
      if (req.readableLength >= req.readableHighWaterMark) continue;
      if (received >= (this.#o.minBodyRate * elapsed) / 1000) continue;
      this.#bodies.delete(req);
      this.#o.metrics.closed.inc({ reason: 'slow_body' });
      this.#o.log({ level: 'warn', event: 'slow_body', bytes: received, ms: Math.round(elapsed) });
      // Whatever the response did, the connection goes: a client below the floor holds nothing more.
      if (w.res.headersSent) {
        w.socket.destroy();
        continue;
      }
      w.res.writeHead(408, { 'content-type': 'text/plain', connection: 'close' });
      w.res.end('token-terminator proxy: request body too slow\n');
      w.socket.destroySoon();
    }
    if (this.#bodies.size === 0 && this.#rateTimer !== undefined) {
      clearInterval(this.#rateTimer);
      this.#rateTimer = undefined;
    }
  }

  #sample(): void {
    let rss: number;
    let heap: HeapNow;
    try {
      rss = this.#o.rss();
      heap = this.#o.heap();
    } catch {
      return; // fail open: no sample, no change
    }
    this.#o.metrics.residentBytes.set(rss);
    this.#o.metrics.heapBytes.set(heap.used);
    const { maxMemoryBytes } = this.#o;
    if (heap.used >= heap.limit * HEAP_ABORT_AT && this.#claims.size > 0) {
      // Every reduction running goes as sent: which one grew the heap is not known. Their claims
      // stay counted until their requests release them.
      this.#o.log({ level: 'warn', event: 'reductions_aborted', count: this.#claims.size, heap: heap.used });
      for (const claim of this.#claims) claim.abort.abort();
      this.#claims.clear();
    }
    if (rss >= maxMemoryBytes * TRIM_AT || heap.used >= heap.limit * HEAP_TRIM_AT) {
      this.#o.trim();
      this.#o.metrics.memoryTrims.inc();
    }
    const over = rss >= maxMemoryBytes || heap.used >= heap.limit * HEAP_OVER_AT;
    if (over !== this.#over)
      this.#o.log({
        level: 'warn',
        event: over ? 'memory_bound_reached' : 'memory_bound_cleared',
        rss,
        heap: heap.used,
        heapLimit: heap.limit,
      });
    this.#over = over;
  }
}
