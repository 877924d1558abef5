/** What every request handler of one proxy shares. */
import type { Dispatcher } from 'undici';
import type { ProxyConfig } from '../../src/config/proxy.js';
import type { RecoveryWireFormat } from '../../src/recovery/formats.js';
import type { Prepared, Terminator } from '../../src/runtime/types.js';
import type { ProviderRequest } from '../../src/step.js';
import type { BodyMemo } from './body.js';
import type { ProxyMetrics } from './metrics.js';
import type { ItemJsonCache } from './serialize.js';

/**
 * One log record. Content-free: event names, API labels, status codes, durations, error class
 * labels and session digests; never a header value, a body or a key.
 */
export interface ProxyLogRecord {
  readonly level: 'info' | 'warn';
  readonly event: string;
  readonly [field: string]: string | number | boolean | undefined;
}

/** One handled request, for the deferred accounting (metrics and the vault's metric row). */
export interface AccountInput {
  readonly format: RecoveryWireFormat;
  /** What the host path made of it (its Step, the client's body with stable objects). */
  readonly prepared: Prepared;
  readonly rawBytes: number;
  /** The request as sent, on stable objects (the client's own when unchanged). */
  readonly sent: ProviderRequest;
  readonly sentBytes: number;
  /** The continuation requests of its recovery rounds (one per round). */
  readonly continuations: readonly ProviderRequest[];
  readonly continuationBytes: number;
  /** The response's status and the request's duration, for its log line. */
  readonly status: number;
  readonly ms: number;
}

/** Everything one proxy instance shares across the requests it handles: settings, Terminator, upstream pool, metrics and caches. */
export interface ProxyContext {
  readonly config: ProxyConfig;
  readonly terminator: Terminator;
  readonly dispatcher: Dispatcher;
  readonly metrics: ProxyMetrics;
  /** Recent request bodies, whose conversation items the next body of a session reuses (see body.ts). */
  readonly bodies: BodyMemo;
  /** JSON bytes of conversation items already serialized (see serialize.ts). */
  readonly itemJson: ItemJsonCache;
  readonly recoveryRounds: number;
  /** Responses whose request the accounting logs (with its figures); the server logs the others when they finish. */
  readonly accounted: WeakSet<object>;
  log(record: ProxyLogRecord): void;
  /** Log `record` the first time its event happens in this proxy (a condition an operator fixes once). */
  logOnce(record: ProxyLogRecord): void;
  account(input: AccountInput): void;
  /**
   * Resolves once the accounting backlog has room: a request waits here before it is reduced while
   * the accounting of answered ones has fallen behind (memory stays bounded under sustained load).
   */
  room(): Promise<void>;
}
