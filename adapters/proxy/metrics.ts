/**
 * The proxy's Prometheus metrics (prom-client, one registry per proxy so two proxies in one
 * process never mix). Under `token-terminator proxy --workers N`, `/metrics` sums every worker's
 * registry (metrics-relay.ts): counters count the whole gateway, and the gauges (in flight,
 * resident and heap bytes, sessions held) are the workers' sum. Content-free by construction: every label value comes from a fixed set in
 * this file, from stage names of our own operators or from error labels (an error's class name and
 * code, src/step.ts `errorLabel`); no path, header, model text or key.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

/** The proxy's Prometheus metrics (prom-client counters, gauges and a histogram) in their own registry. */
export type ProxyMetrics = ReturnType<typeof createProxyMetrics>;

// long: one declaration per metric (name, help text, labels), in exposition order; nothing to split
/**
 * A fresh registry holding the proxy's counters and upstream-latency histogram, all named `token_terminator_proxy_*`.
 *
 * @example
 * const metrics = createProxyMetrics();
 * const text = await metrics.registry.metrics(); // Prometheus exposition format
 */
export function createProxyMetrics(
  held: () => { readonly sessions: number; readonly bytes: number } = () => ({ sessions: 0, bytes: 0 }),
) {
  const registry = new Registry();
  const p = 'token_terminator_proxy_';
  const counter = <L extends string = never>(name: string, help: string, labelNames: readonly L[] = []): Counter<L> =>
    new Counter({ name: p + name, help, labelNames, registers: [registry] });
  // A gauge with `read` is read at each scrape.
  const gauge = (name: string, help: string, read?: () => number): Gauge => {
    const g: Gauge = new Gauge({
      name: p + name,
      help,
      registers: [registry],
      ...(read && { collect: () => g.set(read()) }),
    });
    return g;
  };
  return Object.freeze({
    registry,
    requests: counter('requests_total', 'Requests received, by API and by what the proxy did with them.', [
      'api',
      'outcome',
    ]),
    bytes: counter(
      'request_bytes_total',
      'Request body bytes: raw (as the client sent them), sent (the first upstream request) and recovery (continuation requests after a recovery round).',
      ['api', 'direction'],
    ),
    tokens: counter(
      'request_tokens_total',
      'Request tokens (o200k or the configured counter): raw, sent and recovery, as for bytes.',
      ['api', 'direction'],
    ),
    saved: counter('saved_chars_total', 'Characters saved, by mechanism (pipeline stage).', ['mechanism']),
    recoveryCalls: counter('recovery_calls_total', 'token_terminator calls answered by the proxy.', ['api']),
    recoveryRounds: counter(
      'recovery_rounds_total',
      'Recovery rounds: continued (the model was asked again), mixed (the turn also called client tools), rounds (the round budget was spent).',
      ['api', 'end'],
    ),
    reusedItems: counter(
      'body_items_reused_total',
      "Conversation items taken from the session's previous request body instead of parsed again (their bytes were the same).",
      ['api'],
    ),
    recoveryResults: counter(
      'recovery_results_total',
      'Artifact reads the proxy answered for the model: exact (the stored bytes, read back by id) or failed (an error answer).',
      ['api', 'outcome'],
    ),
    recoveredChars: counter('recovered_chars_total', 'Characters of recovery results sent to the model.', ['api']),
    upstreamSeconds: new Histogram({
      name: `${p}upstream_seconds`,
      help: 'Time from sending a request upstream to its response headers.',
      labelNames: ['api'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
      registers: [registry],
    }),
    upstreamRetries: counter(
      'upstream_retries_total',
      'Requests sent upstream a second time because the upstream closed the connection before any byte of the answer (an idle keep-alive connection closed as it was reused); at most one per request.',
      ['api'],
    ),
    failOpen: counter(
      'fail_open_total',
      'Requests forwarded as the client sent them because something inside the proxy failed.',
      ['reason'],
    ),
    stageFailOpen: counter(
      'stage_fail_open_total',
      'Reduction stages that failed open (their content passed as sent), by stage and error; ' +
        'VaultCapacityError:E_VAULT_CAPACITY means the vault is full of evidence live sessions hold.',
      ['stage', 'error'],
    ),
    accountingWaits: counter(
      'accounting_waits_total',
      'Requests that waited before being reduced because the accounting of answered requests had fallen behind.',
    ),
    rejected: counter(
      'rejected_total',
      'Requests answered 503 with Retry-After at once: in_flight (the in-flight limit), memory (the lower limit that applies above the memory bound), tenant_share (the API key holds its share of the limit).',
      ['reason'],
    ),
    closed: counter(
      'connections_closed_total',
      'Connections the proxy closed itself: slow_body (a request body below the body-rate floor).',
      ['reason'],
    ),
    inFlight: gauge('in_flight', 'Requests this process is serving now.'),
    residentBytes: gauge('resident_bytes', 'Resident set size of this process at the last sample.'),
    heapBytes: gauge(
      'heap_used_bytes',
      'V8 heap in use (live and not yet collected) of this process at the last sample.',
    ),
    memoryTrims: counter(
      'memory_trims_total',
      'Times the in-memory caches were emptied because the resident size was above 90 % of the memory bound or the V8 heap above 85 % of its limit.',
    ),
    sessionsHeld: gauge(
      'sessions_held',
      "Sessions whose request state (the Terminator's lanes) this process holds now.",
      () => held().sessions,
    ),
    sessionStateBytes: gauge(
      'session_state_bytes',
      "Bytes the held sessions' request state is estimated at, against its bound (a sixteenth of the memory bound).",
      () => held().bytes,
    ),
  });
}
