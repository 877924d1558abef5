/**
 * A node:cluster of two workers joined by the metrics relay, for test/proxy/metrics-relay.test.ts.
 * Each worker's registry is one value: 1 for the first worker, 2 for the second. The primary has
 * the first worker gather the gateway's values, makes the second one's own read fail once and has
 * the first gather again, stops the second with SIGSTOP (a worker busy for longer than the relay
 * waits), has the first gather again, and prints the three sums as JSON.
 */
import cluster, { type Worker } from 'node:cluster';
import { once } from 'node:events';
import { relayGatewayMetrics, workerMetricsRelay } from '../../../adapters/proxy/metrics-relay.js';

const TIMEOUT_MS = 200;
type Gathered = { readonly type: 'gathered'; readonly sets: unknown[][] | undefined };

if (cluster.isPrimary) {
  const stop = relayGatewayMetrics(TIMEOUT_MS);
  const workers = [cluster.fork({ VALUE: '1' }), cluster.fork({ VALUE: '2' })];
  await Promise.all(workers.map((w) => once(w, 'message')));
  const gather = async (w: Worker): Promise<number> => {
    const answer = new Promise<Gathered>((resolve) =>
      w.on('message', (m: { type?: string }) => m.type === 'gathered' && resolve(m as Gathered)),
    );
    w.send({ type: 'gather' });
    const sets = (await answer).sets ?? [];
    return sets.flat().reduce((sum: number, v) => sum + Number((v as { value: number }).value), 0);
  };
  const [first, second] = workers as [Worker, Worker];
  const both = await gather(first);
  const failing = once(second, 'message');
  second.send({ type: 'fail' });
  await failing;
  const oneFailed = await gather(first);
  process.kill(second.process.pid!, 'SIGSTOP');
  const oneBusy = await gather(first);
  process.kill(second.process.pid!, 'SIGCONT');
  process.stdout.write(`${JSON.stringify({ both, oneFailed, oneBusy })}\n`);
  stop();
  for (const w of workers) w.kill();
} else {
  const value = Number(process.env['VALUE']);
  let fail = false;
  const own = (): Promise<unknown[]> => {
    if (!fail) return Promise.resolve([{ value }]);
    fail = false;
    return Promise.reject(new Error('registry read failed'));
  };
  const relay = workerMetricsRelay(own, 20 * TIMEOUT_MS);
  process.on('message', (m: { type?: string }) => {
    if (m.type === 'fail') {
      fail = true;
      process.send?.({ type: 'failing' });
    }
    if (m.type !== 'gather') return;
    void relay.gather().then((sets) => process.send?.({ type: 'gathered', sets }));
  });
  process.send?.({ type: 'ready' });
}
