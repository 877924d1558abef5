/**
 * `/metrics` for the whole gateway when several node:cluster workers serve it (docs/gateway.md,
 * "Using every core"): the worker that is asked sends the primary one IPC message; the primary
 * collects every live worker's registry values (prom-client's JSON form) and answers with all of
 * them, which the asking worker sums (`AggregatorRegistry.aggregate`). The primary holds no metrics
 * and loads no prom-client. A worker that does not answer within the timeout (busy, or starting),
 * or whose own read failed, counts with the values it shared last, so a counter never goes down
 * while its worker lives; without an answer from the primary (a cluster of the user's own) the
 * asking worker answers with its own values.
 */
import cluster, { type Worker } from 'node:cluster';

/** Worker → primary: "the gateway's metrics, please" (`id` is the worker's). */
const ASK = 'token-terminator:metrics-ask';
/** Primary → every worker: "your metrics" (`id` is the primary's). */
const COLLECT = 'token-terminator:metrics-collect';
/** Worker → primary: its metrics for a collection. */
const SHARE = 'token-terminator:metrics-share';
/** Primary → the asking worker: every worker's metrics. */
const ANSWER = 'token-terminator:metrics-answer';

type Message = { readonly type?: unknown; readonly id?: unknown; readonly metrics?: unknown };
const isMessage = (m: unknown): m is Message => typeof m === 'object' && m !== null;

/** How long the primary waits for the workers, in milliseconds; a worker waits for the primary twice as long. */
export const RELAY_TIMEOUT_MS = 3000;

/**
 * In the primary: answer the workers' `/metrics` asks with every live worker's values. Returns
 * the function that stops relaying.
 *
 * @example
 * const stop = relayGatewayMetrics();
 * // … on shutdown
 * stop();
 */
export function relayGatewayMetrics(timeoutMs = RELAY_TIMEOUT_MS): () => void {
  let next = 0;
  /** What each live worker shared last, by worker id. */
  const last = new Map<number, unknown[]>();
  const collecting = new Map<number, { pending: Set<number>; sets: unknown[]; done(): void }>();
  const onMessage = (worker: Worker, message: unknown): void => {
    if (!isMessage(message)) return;
    if (message.type === ASK) {
      const cid = next++;
      const live = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w?.isConnected() === true);
      const entry = {
        pending: new Set<number>(),
        sets: [] as unknown[],
        done: () => {
          clearTimeout(timer);
          collecting.delete(cid);
          for (const id of entry.pending) {
            const known = last.get(id);
            if (known !== undefined) entry.sets.push(known);
          }
          if (worker.isConnected()) worker.send({ type: ANSWER, id: message.id, metrics: entry.sets });
        },
      };
      const timer = setTimeout(() => entry.done(), timeoutMs);
      collecting.set(cid, entry);
      for (const w of live) {
        try {
          w.send({ type: COLLECT, id: cid });
          entry.pending.add(w.id);
        } catch {
          // gone meanwhile: left out
        }
      }
      if (entry.pending.size === 0) entry.done();
      return;
    }
    if (message.type === SHARE && typeof message.id === 'number') {
      // A worker whose own read failed shares no values: it is counted with the last it shared.
      if (Array.isArray(message.metrics)) last.set(worker.id, message.metrics);
      const entry = collecting.get(message.id);
      if (entry === undefined || !entry.pending.delete(worker.id)) return;
      const known = last.get(worker.id);
      if (known !== undefined) entry.sets.push(known);
      if (entry.pending.size === 0) entry.done();
    }
  };
  const onExit = (worker: Worker): void => void last.delete(worker.id);
  cluster.on('message', onMessage);
  cluster.on('exit', onExit);
  return () => {
    cluster.off('message', onMessage);
    cluster.off('exit', onExit);
    for (const entry of collecting.values()) entry.done();
  };
}

/**
 * In a worker (a process with an IPC channel to its primary): share `own()` when the primary
 * collects; `gather()` resolves with every live worker's values (this one's included), or undefined
 * when the primary did not answer; `close()` stops answering collections.
 *
 * @example
 * const relay = workerMetricsRelay(() => registry.getMetricsAsJSON());
 * const sets = await relay.gather(); // AggregatorRegistry.aggregate(sets)
 */
export function workerMetricsRelay(own: () => Promise<unknown[]>, timeoutMs = 2 * RELAY_TIMEOUT_MS) {
  let next = 0;
  const waiting = new Map<number, (sets: unknown[][] | undefined) => void>();
  const onMessage = (message: unknown): void => {
    if (!isMessage(message)) return;
    if (message.type === COLLECT) {
      const id = message.id;
      own().then(
        (metrics) => process.send?.({ type: SHARE, id, metrics }),
        () => process.send?.({ type: SHARE, id }),
      );
      return;
    }
    if (message.type === ANSWER && typeof message.id === 'number') {
      waiting.get(message.id)?.(Array.isArray(message.metrics) ? (message.metrics as unknown[][]) : undefined);
    }
  };
  process.on('message', onMessage);
  return {
    gather: () =>
      new Promise<unknown[][] | undefined>((resolve) => {
        if (process.send === undefined || !process.connected) return resolve(undefined);
        const id = next++;
        const finish = (sets: unknown[][] | undefined): void => {
          clearTimeout(timer);
          waiting.delete(id);
          resolve(sets);
        };
        const timer = setTimeout(() => finish(undefined), timeoutMs);
        waiting.set(id, finish);
        try {
          process.send({ type: ASK, id });
        } catch {
          finish(undefined);
        }
      }),
    close: () => {
      process.off('message', onMessage);
      for (const finish of [...waiting.values()]) finish(undefined);
    },
  };
}
