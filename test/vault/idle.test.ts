/**
 * Deferred vault maintenance waits for the process to be idle (src/vault/idle.ts): no reduction in
 * flight (src/activity.ts) and no statement for the quiet time; past maxWaitMs the first turn with
 * none in flight, past maxBusyWaitMs any turn. Driven by fake
 * timers and an injected clock: nothing here depends on how fast the machine is.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Subject, firstValueFrom } from 'rxjs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { countReductions, ReductionActivity } from '../../src/activity.js';
import { stepOperator } from '../../src/operator-kit.js';
import { createStep, type Step } from '../../src/step.js';
import { createVault } from '../../src/vault/index.js';
import { createIdleGate } from '../../src/vault/idle.js';

describe('idle gate', () => {
  let clock = 0;
  let activity = { inFlight: 0, lastEnded: Number.NEGATIVE_INFINITY };
  const gate = () => createIdleGate({ quietMs: 25, maxWaitMs: 1000, now: () => clock, activity: () => activity });
  const advance = (ms: number): void => {
    clock += ms;
    vi.advanceTimersByTime(ms);
  };
  beforeEach(() => {
    vi.useFakeTimers();
    clock = 0;
    activity = { inFlight: 0, lastEnded: Number.NEGATIVE_INFINITY };
  });
  afterEach(() => vi.useRealTimers());

  it('runs a task once the store has been quiet for quietMs', () => {
    const g = gate();
    const task = vi.fn();
    g.defer(task);
    advance(20);
    g.mark(); // a statement at t=20: quiet again only from t=45
    advance(20);
    expect(task).not.toHaveBeenCalled();
    advance(10);
    expect(task).toHaveBeenCalledTimes(1);
  });

  it('waits while a reduction is in flight, and for quietMs after it ended', () => {
    const g = gate();
    const task = vi.fn();
    activity = { inFlight: 1, lastEnded: Number.NEGATIVE_INFINITY };
    g.defer(task);
    advance(300);
    expect(task).not.toHaveBeenCalled();
    activity = { inFlight: 0, lastEnded: clock };
    advance(20);
    expect(task).not.toHaveBeenCalled();
    advance(30);
    expect(task).toHaveBeenCalledTimes(1);
  });

  it('past maxWaitMs a task runs at the first turn with no reduction in flight, quiet or not', () => {
    const g = gate();
    const task = vi.fn();
    activity = { inFlight: 1, lastEnded: Number.NEGATIVE_INFINITY };
    g.defer(task);
    advance(990);
    expect(task).not.toHaveBeenCalled();
    // Overdue, but a reduction is in flight (its timers fire between its slices): not inside it.
    advance(400);
    expect(task).not.toHaveBeenCalled();
    // Between two calls that follow each other at once: no 25 ms of quiet, none in flight.
    activity = { inFlight: 0, lastEnded: clock };
    g.mark();
    advance(1);
    expect(task).toHaveBeenCalledTimes(1);
  });

  it('a host that always has a reduction in flight still gets its maintenance after maxBusyWaitMs', () => {
    const g = gate();
    const task = vi.fn();
    activity = { inFlight: 1, lastEnded: Number.NEGATIVE_INFINITY };
    g.defer(task);
    advance(4990);
    expect(task).not.toHaveBeenCalled();
    advance(20);
    expect(task).toHaveBeenCalledTimes(1);
  });

  it('queues a waiting task once, isolates a throwing one, and runs nothing after close', () => {
    const g = gate();
    const task = vi.fn();
    const bad = vi.fn(() => {
      throw new Error('boom');
    });
    g.defer(bad);
    g.defer(task);
    g.defer(task);
    advance(30);
    expect(bad).toHaveBeenCalledTimes(1);
    expect(task).toHaveBeenCalledTimes(1);
    g.defer(task);
    g.close();
    g.defer(task);
    advance(2000);
    expect(task).toHaveBeenCalledTimes(1);
  });
});

describe('reductions in flight', () => {
  it('a Step counts from when it enters the counted chain until its output leaves, synchronous or not', async () => {
    const activity = new ReductionActivity();
    let release!: () => void;
    const gateOpen = new Promise<void>((r) => (release = r));
    let during = -1;
    const slow = stepOperator<string>('slow', () => async (step) => {
      during = activity.inFlight;
      await gateOpen;
      return step;
    });
    const input = new Subject<Step<string>>();
    const out = firstValueFrom(input.pipe(countReductions(activity, slow)));
    input.next(createStep('x', { sessionId: 's' }));
    expect(activity.inFlight).toBe(1);
    release();
    await out;
    expect(during).toBe(1);
    expect(activity.inFlight).toBe(0);
    expect(activity.lastEnded).toBeGreaterThan(Number.NEGATIVE_INFINITY);

    const sync = stepOperator<string>('sync', () => (step) => step);
    const s2 = new Subject<Step<string>>();
    const o2 = firstValueFrom(s2.pipe(countReductions(activity, sync)));
    s2.next(createStep('y', { sessionId: 's' }));
    await o2;
    expect(activity.inFlight).toBe(0);
  });

  it('an unsubscribed reduction stops counting, and ending twice counts once', () => {
    const activity = new ReductionActivity();
    const hang = stepOperator<string>('hang', () => () => new Promise<undefined>(() => undefined));
    const input = new Subject<Step<string>>();
    const sub = input.pipe(countReductions(activity, hang)).subscribe();
    input.next(createStep('x', { sessionId: 's' }));
    input.next(createStep('y', { sessionId: 's' }));
    expect(activity.inFlight).toBe(2);
    sub.unsubscribe();
    expect(activity.inFlight).toBe(0);
    const end = activity.begin();
    end();
    end();
    expect(activity.inFlight).toBe(0);
  });

  it("is each Terminator's own: one's reductions in flight are not another's", async () => {
    const a = new ReductionActivity();
    const b = new ReductionActivity();
    const hang = stepOperator<string>('hang', () => () => new Promise<undefined>(() => undefined));
    const input = new Subject<Step<string>>();
    const sub = input.pipe(countReductions(a, hang)).subscribe();
    input.next(createStep('x', { sessionId: 's' }));
    expect([a.inFlight, b.inFlight]).toEqual([1, 0]);
    sub.unsubscribe();
  });
});

describe('the SQLite vault indexes queued content only when idle', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'tt-idle-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));
  const pending = (path: string): number => {
    const db = new Database(path, { readonly: true });
    try {
      return db.prepare('SELECT COUNT(*) FROM fts_pending').pluck().get() as number;
    } finally {
      db.close();
    }
  };
  // Waits on the event loop's turns for a condition, never on a clock: bounded by a turn count.
  const until = async (cond: () => boolean): Promise<boolean> => {
    for (let i = 0; i < 5000 && !cond(); i++) await new Promise((r) => setTimeout(r, 1));
    return cond();
  };

  it('leaves the queue alone while a reduction is in flight, and indexes it after', async () => {
    const path = join(dir, 'vault.sqlite3');
    const activity = new ReductionActivity();
    const vault = await createVault({ path, activity });
    try {
      const end = activity.begin();
      await vault.put({ content: 'indexed only once the process is idle' });
      expect(pending(path)).toBe(1);
      // Timer turns pass while the reduction is in flight, past the 25 ms quiet time (the old idle
      // timer indexed after it). The gate's maxWaitMs (1 s) would index anyway: on a machine so
      // loaded that these turns took that long, the check says nothing (the fake-timer tests above
      // cover the rule itself).
      const t0 = performance.now();
      for (let i = 0; i < 60; i++) await new Promise((r) => setTimeout(r, 1));
      const stillPending = pending(path);
      if (performance.now() - t0 < 900) expect(stillPending).toBe(1);
      end();
      expect(await until(() => pending(path) === 0)).toBe(true);
      expect(await vault.search('process is idle')).toHaveLength(1);
    } finally {
      await vault.close();
    }
  });
});
