/** What every request handler of one proxy shares. */
import type { RecoveryWireFormat } from '../../src/recovery/formats.js';
import type { Prepared } from '../../src/runtime/types.js';
import type { ProviderRequest } from '../../src/step.js';
import type { proxyContext } from './server.js';

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
export type ProxyContext = ReturnType<typeof proxyContext>;
