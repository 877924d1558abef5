import { afterEach, describe, expect, it, vi } from 'vitest';
import { BatchQueue } from '../../src/telemetry/batch-queue.js';

afterEach(() => {
  vi.useRealTimers();
});

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
});
