/**
 * `token-terminator proxy --workers N`: this process is the primary of a node:cluster (one listening
 * socket shared by the workers). Every worker runs the proxy command as one process does; they share
 * only the store, as replicas do, so a worker that dies loses only its requests and the primary forks
 * a replacement on the same port. SIGINT / SIGTERM stop every worker, then the primary.
 */
import cluster, { type Worker } from 'node:cluster';
import { availableParallelism } from 'node:os';
import { relayGatewayMetrics } from '../../../adapters/proxy/metrics-relay.js';

/** IPC message that asks a worker to close its proxy and exit. */
export const STOP_MESSAGE = 'token-terminator:proxy-stop';

/** How long a stopping worker may take before it is killed. */
const STOP_GRACE_MS = 30_000;

export interface PrimaryOptions {
  readonly workers: number;
  /** Each worker's share of the gateway's memory bound: its V8 heap is limited to half of it (unless Node was given a heap limit). */
  readonly maxMemoryBytes: number;
  /**
   * Cores the workers share: each worker's V8 helper-thread pool is `cores / workers` threads (at
   * least 1, at most Node's default 4) unless Node was given `--v8-pool-size`.
   *
   * @defaultValue `os.availableParallelism()`
   */
  readonly cores?: number;
  /** The line printed once every first worker listens (`url` is where they listen). */
  readonly banner: (url: string) => string;
  /** Lifecycle records (worker started, exited, replaced), always written. */
  readonly log: (record: Readonly<Record<string, string | number | null>>) => void;
}

/** Run the primary until a signal stops it; resolves with the exit code. */
export function servePrimary(options: PrimaryOptions): Promise<number> {
  return new Promise<number>((resolve) => {
    const live = new Set<Worker>();
    const listened = new WeakSet<Worker>();
    let ready = 0;
    let stopping = false;
    let code = 0;

    // Each worker's /metrics answers for all of them: the primary relays their values.
    const stopRelay = relayGatewayMetrics();
    const finish = (): void => {
      if (live.size > 0) return;
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      stopRelay();
      resolve(code);
    };

    function stop(): void {
      if (stopping) return;
      stopping = true;
      for (const worker of live) {
        try {
          // One still starting may not listen for messages yet: a signal reaches it either way.
          if (listened.has(worker)) worker.send(STOP_MESSAGE);
          else worker.process.kill('SIGTERM');
        } catch {
          worker.process.kill('SIGTERM');
        }
        setTimeout(() => worker.process.kill('SIGKILL'), STOP_GRACE_MS).unref();
      }
      finish();
    }

    const fork = (): void => {
      // A replacement listens as the first ones did (the same port setting, even 0): node:cluster
      // then hands it the socket they share instead of binding a new one.
      const worker = cluster.fork(workerEnv);
      live.add(worker);
      worker.once('listening', (address: { address: string; port: number; addressType: number | string }) => {
        listened.add(worker);
        options.log({ level: 'info', event: 'worker_ready', pid: worker.process.pid ?? null });
        if (++ready === options.workers) {
          const host = address.addressType === 6 ? `[${address.address}]` : address.address;
          process.stderr.write(options.banner(`http://${host}:${address.port}`));
        }
      });
      worker.once('exit', (exitCode: number | null, signal: string | null) => {
        live.delete(worker);
        const pid = worker.process.pid ?? null;
        if (stopping) {
          if (exitCode !== 0) code = 1;
          finish();
          return;
        }
        options.log({ level: 'warn', event: 'worker_exit', pid, code: exitCode, signal });
        if (!listened.has(worker)) {
          // It never served: forking again would fail the same way.
          process.stderr.write(`token-terminator proxy: a worker exited before listening (code ${String(exitCode)})\n`);
          code = 1;
          stop();
          return;
        }
        fork();
      });
    };

    // glibc's malloc raises its mmap threshold to the largest block freed, after which request
    // bodies of a few hundred kB come from the heap and fragment it: RSS grows with the largest
    // bodies seen, not with what is held. A fixed threshold returns them to the system on free.
    const workerEnv: Record<string, string> =
      process.env['MALLOC_MMAP_THRESHOLD_'] === undefined ? { MALLOC_MMAP_THRESHOLD_: '131072' } : {};
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
    cluster.setupPrimary({ execArgv: workerExecArgv(options) });
    for (let i = 0; i < options.workers; i++) fork();
  });
}

/** Node's own number of V8 helper threads (`--v8-pool-size`'s default). */
const NODE_POOL_SIZE = 4;

/**
 * The Node flags a worker starts with: the primary's own, then what Node was not given already —
 * a V8 heap limit of half the worker's share (so V8 collects before its heap grows well past its
 * live data) and a V8 helper-thread pool of the worker's share of the cores (its helper threads
 * would compete with the workers' main threads). Under two cores per worker the collector runs on
 * the worker's own thread (`--single-threaded-gc`): fewer context switches and 9 % less CPU per
 * answer in `bench proxy-load` (RELIABILITY.md).
 *
 * @example
 * workerExecArgv({ workers: 2, cores: 2, maxMemoryBytes: 469_762_048 }, [], '');
 * // ['--max-old-space-size=224', '--v8-pool-size=1', '--single-threaded-gc']
 */
export function workerExecArgv(
  options: Pick<PrimaryOptions, 'workers' | 'maxMemoryBytes' | 'cores'>,
  execArgv: readonly string[] = process.execArgv,
  nodeOptions: string = process.env['NODE_OPTIONS'] ?? '',
): string[] {
  const given = (flag: string): boolean => [...execArgv, nodeOptions].some((a) => a.includes(flag));
  const out = [...execArgv];
  if (!given('max-old-space-size'))
    out.push(`--max-old-space-size=${Math.floor(options.maxMemoryBytes / 2 / 2 ** 20)}`);
  // The cores each worker has to itself.
  const share = (options.cores ?? availableParallelism()) / Math.max(1, options.workers);
  const pool = Math.min(NODE_POOL_SIZE, Math.max(1, Math.floor(share)));
  if (!given('v8-pool-size')) out.push(`--v8-pool-size=${pool}`);
  // Off when Node was given a pool size or a threading flag of its own (`--single-threaded`, `--no-single-threaded-gc`).
  if (share < 2 && !given('v8-pool-size') && !given('single-threaded')) out.push('--single-threaded-gc');
  return out;
}
