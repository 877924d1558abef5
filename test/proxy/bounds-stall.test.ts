/**
 * The body-rate floor judges clients, not this process: a sweep that runs late (the worker was busy
 * reducing another request, or the machine was loaded) sees no bytes read, because timers run before
 * sockets are read. Seen in CI: 8 requests of 29 MB at once, and a fast client beside them was closed
 * as slow. The clock is a number the test moves and the sweep's timer is faked, so nothing is timed;
 * the sockets and the HTTP server are real.
 */
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Bounds } from '../../adapters/proxy/bounds.js';
import { createProxyMetrics } from '../../adapters/proxy/metrics.js';

const WINDOW = 10_000;
const RATE = 1024;

let server: Server | undefined;
let bounds: Bounds | undefined;
let socket: Socket | undefined;
afterEach(() => {
  vi.useRealTimers();
  socket?.destroy();
  bounds?.stop();
  server?.close();
});

/** A server under `Bounds`, a client that has sent its headers and the first 100 of 2,000 body bytes, and the clock. */
async function started(): Promise<{
  clock: { now: number };
  received: () => string;
  answered: Promise<void>;
  closedSlow: () => Promise<number>;
}> {
  const clock = { now: 0 };
  const metrics = createProxyMetrics();
  vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
  bounds = new Bounds({
    maxInFlight: 8,
    minBodyRate: RATE,
    rateWindowMs: WINDOW,
    maxMemoryBytes: 1 << 30,
    rss: () => 0,
    heap: () => ({ used: 0, limit: 1 << 30 }),
    memoryIntervalMs: 60_000,
    trim: () => undefined,
    metrics,
    log: () => undefined,
    now: () => clock.now,
  });
  let arrived!: () => void;
  const read = new Promise<void>((r) => (arrived = r));
  const b = bounds;
  server = createServer((req, res) => {
    if (!b.admit(req, res, false)) return;
    req.once('data', () => arrived());
    req.resume();
    req.on('end', () => res.end('ok'));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const s = connect((server.address() as AddressInfo).port, '127.0.0.1');
  socket = s;
  await once(s, 'connect');
  let text = '';
  s.on('data', (d: Buffer) => (text += d.toString()));
  const answered = once(s, 'close').then(() => undefined);
  s.write(`POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 2000\r\nconnection: close\r\n\r\n${'a'.repeat(100)}`);
  await read;
  const closedSlow = async (): Promise<number> =>
    (await metrics.registry.getMetricsAsJSON())
      .find((m) => m.name === 'token_terminator_proxy_connections_closed_total')
      ?.values.find((v) => v.labels['reason'] === 'slow_body')?.value ?? 0;
  return { clock, received: () => text, answered, closedSlow };
}

describe('proxy bounds: the body-rate floor after a stall of this process', () => {
  it('does not close a client whose bytes this process had no chance to read, and still closes one that stays slow', async () => {
    const { clock, received, answered, closedSlow } = await started();
    // The process stalls for three windows; the first sweep after it runs late.
    clock.now += 3 * WINDOW;
    vi.advanceTimersByTime(WINDOW / 2);
    expect(await closedSlow()).toBe(0);
    // On-time sweeps after it: a whole window with no new byte is slow.
    for (let t = 0; t < 3; t++) {
      clock.now += WINDOW / 2;
      vi.advanceTimersByTime(WINDOW / 2);
    }
    await answered;
    expect(received()).toMatch(/^HTTP\/1\.1 408 /);
    expect(await closedSlow()).toBe(1);
  });

  it('answers a client that sends the rest right after the stall', async () => {
    const { clock, received, answered } = await started();
    clock.now += 3 * WINDOW;
    vi.advanceTimersByTime(WINDOW / 2);
    socket!.write('b'.repeat(1900));
    await answered;
    expect(received()).toMatch(/^HTTP\/1\.1 200 /);
  });
});
