import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { BatchQueue, type BatchQueueOptions } from '../src/batch-queue.js';

afterEach(() => {
  vi.useRealTimers();
});

/** A queue whose batches are recorded in `ran` and each end when its gate (in `gates`, in order) is called. */
function gatedQueue(options: BatchQueueOptions<number>) {
  const gates: (() => void)[] = [];
  const ran: number[][] = [];
  const queue = new BatchQueue<number>(
    (b) =>
      new Promise<void>((resolve) => {
        ran.push([...b]);
        gates.push(resolve);
      }),
    options,
  );
  return { queue, ran, gates };
}

describe('BatchQueue', () => {
  it('waits delayMs, then runs batches of at most maxBatch in order; a full queue starts at once', async () => {
    vi.useFakeTimers();
    const batches: string[][] = [];
    const queue = new BatchQueue<string>(async (b) => void batches.push([...b]), { delayMs: 100, maxBatch: 3 });
    queue.add('a');
    queue.add('b');
    await vi.advanceTimersByTimeAsync(99);
    expect(batches).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(batches).toEqual([['a', 'b']]);
    for (const x of ['c', 'd', 'e', 'f']) queue.add(x); // the third fills a batch: no wait
    await vi.advanceTimersByTimeAsync(0);
    expect(batches).toEqual([['a', 'b'], ['c', 'd', 'e'], ['f']]);
  });

  it('keeps running after a failed batch, and settled() never rejects', async () => {
    const seen: string[] = [];
    const queue = new BatchQueue<string>(async (b) => {
      if (b.includes('bad')) throw new Error('store down');
      seen.push(...b);
    });
    queue.add('bad');
    await queue.settled();
    queue.add('good');
    await queue.settled();
    expect(seen).toEqual(['good']);
  });

  it('room(): answers at once below maxPending, then only once a batch has run; nothing is dropped', async () => {
    const { queue, ran, gates } = gatedQueue({ maxPending: 2 });
    await queue.room();
    queue.add(1);
    await queue.room();
    queue.add(2);
    expect(queue.pending).toBe(2);
    let roomy = false;
    const waiting = queue.room().then(() => (roomy = true));
    // Full: room() started the batch at once; it holds both items until it ends.
    await new Promise((resolve) => setImmediate(resolve));
    expect({ ran, roomy, pending: queue.pending }).toEqual({ ran: [[1, 2]], roomy: false, pending: 2 });
    gates.shift()!();
    await waiting;
    queue.add(3);
    const done = queue.settled(); // starts the batch holding 3, which waits for its gate
    gates.shift()!();
    await done;
    expect({ ran, pending: queue.pending }).toEqual({ ran: [[1, 2], [3]], pending: 0 });
  });

  it('room(): a released adder that adds nothing does not leave the others waiting', async () => {
    let release: (() => void) | undefined;
    const queue = new BatchQueue<string>(() => new Promise<void>((resolve) => (release = resolve)), { maxPending: 1 });
    queue.add('a');
    const waiting = [queue.room(), queue.room(), queue.room()];
    await new Promise((resolve) => setImmediate(resolve));
    release!();
    // Room for one, and the one released adds nothing: with nothing queued, everyone goes.
    await Promise.all(waiting);
    expect(queue.pending).toBe(0);
  });

  it('refuses a maxPending below 1', () => {
    expect(() => new BatchQueue<string>(async () => undefined, { maxPending: 0 })).toThrow(RangeError);
    expect(() => new BatchQueue<string>(async () => undefined, { maxPendingWeight: 0 })).toThrow(RangeError);
  });

  it('room(): waits while maxPendingWeight is held, though maxPending has room, and lets go once a batch has run', async () => {
    const { queue, ran, gates } = gatedQueue({ maxPending: 100, weigh: (n) => n, maxPendingWeight: 10 });
    await queue.room();
    queue.add(4);
    await queue.room();
    queue.add(6);
    expect({ pending: queue.pending, weight: queue.pendingWeight, full: queue.full }).toEqual({
      pending: 2,
      weight: 10,
      full: true,
    });
    let roomy = false;
    const waiting = queue.room().then(() => (roomy = true));
    await new Promise((resolve) => setImmediate(resolve));
    expect({ ran, roomy }).toEqual({ ran: [[4, 6]], roomy: false });
    gates.shift()!();
    await waiting;
    expect(queue.pendingWeight).toBe(0);
    queue.add(3);
    const done = queue.settled();
    gates.shift()!();
    await done;
    expect({ ran, weight: queue.pendingWeight }).toEqual({ ran: [[4, 6], [3]], weight: 0 });
  });

  it('property: producers that await room() before each add never hold more than maxPending + producers − 1 items (nor maxPendingWeight − 1 + what each producer adds at most), every item runs once, in order per producer', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 1, max: 5 }),
        fc.option(fc.integer({ min: 1, max: 4 }), { nil: undefined }),
        fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 30 }),
        fc.option(fc.integer({ min: 1, max: 20 }), { nil: undefined }),
        async (maxPending, producers, maxBatch, hops, maxPendingWeight) => {
          let h = 0;
          const seen: string[] = [];
          let most = 0;
          let heaviest = 0;
          // An item weighs 1 + its index within its producer modulo 4 (1–4).
          const weigh = (item: string): number => 1 + (Number(item.split(':')[1]) % 4);
          const queue = new BatchQueue<string>(
            async (batch) => {
              // A batch takes a varying number of event-loop turns, as a store write does.
              for (let i = hops[h++ % hops.length]!; i > 0; i--) await new Promise((r) => setImmediate(r));
              seen.push(...batch);
            },
            {
              maxPending,
              ...(maxBatch === undefined ? {} : { maxBatch }),
              ...(maxPendingWeight === undefined ? {} : { weigh, maxPendingWeight }),
            },
          );
          const perProducer = 8;
          await Promise.all(
            Array.from({ length: producers }, async (_, p) => {
              for (let i = 0; i < perProducer; i++) {
                await queue.room();
                queue.add(`${p}:${i}`);
                most = Math.max(most, queue.pending);
                heaviest = Math.max(heaviest, queue.pendingWeight);
              }
            }),
          );
          await queue.settled();
          expect(most).toBeLessThanOrEqual(maxPending + producers - 1);
          // An adder goes while the weight is under the bound; those let go at once add up to 4 each.
          if (maxPendingWeight !== undefined)
            expect(heaviest).toBeLessThanOrEqual(maxPendingWeight - 1 + 4 * producers);
          expect(queue.pendingWeight).toBe(0);
          expect(seen).toHaveLength(producers * perProducer);
          for (let p = 0; p < producers; p++)
            expect(seen.filter((x) => x.startsWith(`${p}:`))).toEqual(
              Array.from({ length: perProducer }, (_, i) => `${p}:${i}`),
            );
        },
      ),
      { numRuns: 150 },
    );
  });
});
