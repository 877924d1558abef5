import Database from 'better-sqlite3';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTerminator, type Terminator } from '../../src/runtime/index.js';
import { createStep, type ProviderRequest, type Step } from '../../src/step.js';
import { BatchQueue } from '../../src/batch-queue.js';
import { recordedStep, type RecordedStep } from '../../src/telemetry/deferred-records.js';
import { readMetricsSummary } from '../support/metrics-summary.js';

/** The runtime's queue of answered requests: each snapshotted when added (recordedStep), recorded later. */
class DeferredRecords extends BatchQueue<RecordedStep> {
  override add(step: Step<ProviderRequest>): void {
    super.add(recordedStep(step));
  }
}

const hop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

function request(text: string, extra: Record<string, unknown>[] = []): ProviderRequest {
  return { model: 'gpt-4o', messages: [{ role: 'user', content: text }, ...extra] };
}

describe('DeferredRecords (unit)', () => {
  it('records on a later turn of the event loop, in the order the requests were added', async () => {
    const seen: string[] = [];
    const records = new DeferredRecords(async (batch) => {
      for (const step of batch) seen.push(step.context.requestId!);
    });
    records.add(createStep(request('a'), { sessionId: 's', requestId: 'r1' }));
    records.add(createStep(request('b'), { sessionId: 't', requestId: 'r2' }));
    records.add(createStep(request('c'), { sessionId: 's', requestId: 'r3' }));
    expect(seen).toEqual([]);
    await records.settled();
    expect(seen).toEqual(['r1', 'r2', 'r3']);
  });

  it('runs without settled() once the caller yields to the event loop', async () => {
    const seen: string[] = [];
    const records = new DeferredRecords(async (batch) => void seen.push(...batch.map((s) => s.context.requestId!)));
    records.add(createStep(request('a'), { sessionId: 's', requestId: 'r1' }));
    await hop();
    await hop();
    expect(seen).toEqual(['r1']);
  });

  it('records a request added while the last batch is finishing, without settled()', async () => {
    // Added from inside the run, some microtasks later: one of these lands after the drain's last
    // look at its queue and before the batch counts as finished.
    for (let hops = 0; hops < 5; hops++) {
      const seen: string[] = [];
      const records: DeferredRecords = new DeferredRecords(async (batch) => {
        seen.push(...batch.map((s) => s.context.requestId!));
        if (seen.length > 1) return;
        let later = Promise.resolve();
        for (let i = 0; i < hops; i++) later = later.then(() => undefined);
        void later.then(() => records.add(createStep(request('b'), { sessionId: 's', requestId: 'r2' })));
      });
      records.add(createStep(request('a'), { sessionId: 's', requestId: 'r1' }));
      for (let i = 0; i < 5; i++) await hop();
      expect({ hops, seen }).toEqual({ hops, seen: ['r1', 'r2'] });
    }
  });

  it('drops a failing batch without rejecting and still records the next one', async () => {
    const seen: string[] = [];
    let fail = true;
    const records = new DeferredRecords(async (batch) => {
      if (fail) throw new Error('store down');
      seen.push(...batch.map((s) => s.context.requestId!));
    });
    records.add(createStep(request('a'), { sessionId: 's', requestId: 'r1' }));
    await expect(records.settled()).resolves.toBeUndefined();
    fail = false;
    records.add(createStep(request('b'), { sessionId: 's', requestId: 'r2' }));
    await records.settled();
    expect(seen).toEqual(['r2']);
  });

  it('records the request as it was when added, not after the caller appended to its arrays', async () => {
    const messages: Record<string, unknown>[] = [{ role: 'user', content: 'hi' }];
    const original = { model: 'gpt-4o', messages };
    const value = { model: 'gpt-4o', messages: [...messages] };
    let seen: Step<ProviderRequest> | undefined;
    const records = new DeferredRecords(async ([step]) => void (seen = step));
    records.add({ ...createStep(original, { sessionId: 's', lockBudget: { remainingMs: 0 } }), value });
    messages.push({ role: 'assistant', content: 'hello' });
    value.messages.push({ role: 'assistant', content: 'hello' });
    await records.settled();
    expect(seen!.original['messages']).toHaveLength(1);
    expect(seen!.value['messages']).toHaveLength(1);
    // The call's lock budget is spent: the deferred write waits with its own.
    expect(seen!.context.lockBudget).toBeUndefined();
  });

  it('keeps an unchanged request one object (one measurement for both sides)', () => {
    const step = recordedStep(createStep(request('a'), { sessionId: 's' }));
    expect(step.value).toBe(step.original);
  });
});

describe('deferred request telemetry (runtime)', () => {
  let dir: string;
  let vaultPath: string;
  let ledgerPath: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'tt-deferred-'));
    vaultPath = join(dir, 'v.sqlite3');
    ledgerPath = join(dir, 'experiments.sqlite3');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const open = (options: { metrics?: boolean } = {}): Promise<Terminator> =>
    createTerminator({ env: {}, overrides: { dbPath: vaultPath }, ...options });

  /** The ledger's turns, per session in their order: [sessionId, turnId, rawTokens]. */
  const turns = (): [string, string, number][] => {
    if (!existsSync(ledgerPath)) return [];
    const db = new Database(ledgerPath, { readonly: true });
    try {
      const rows = db
        .prepare('select session_id as s, turn_id as t, raw_tokens as raw from turns order by session_id, seq')
        .all() as { s: string; t: string; raw: number }[];
      return rows.map((r) => [r.s, r.t, r.raw]);
    } catch {
      return []; // not created yet
    } finally {
      db.close();
    }
  };

  it('answers the call before its ledger turn is written; settled() waits for it', async () => {
    await using tt = await open();
    await tt.reduceRequest(request('hello'), { sessionId: 's', requestId: 'r1' });
    expect(turns()).toEqual([]);
    await tt.settled();
    expect(turns()).toEqual([['s', 'r1', expect.any(Number)]]);
  });

  it("keeps each session's turns in call order when sessions' calls interleave", async () => {
    await using tt = await open();
    for (let round = 1; round <= 3; round++) {
      await Promise.all(
        ['a', 'b'].map((s) => tt.reduceRequest(request(`${s} ${round}`), { sessionId: s, requestId: `${s}${round}` })),
      );
    }
    await tt.settled();
    expect(turns().map(([s, t]) => `${s}:${t}`)).toEqual(['a:a1', 'a:a2', 'a:a3', 'b:b1', 'b:b2', 'b:b3']);
  });

  it('close() writes what is still pending', async () => {
    const tt = await open();
    await tt.reduceRequest(request('one'), { sessionId: 's', requestId: 'r1' });
    await tt.reduceRequest(request('two'), { sessionId: 's', requestId: 'r2' });
    await tt.close();
    expect(turns().map(([, t]) => t)).toEqual(['r1', 'r2']);
    expect(readMetricsSummary(vaultPath).requests).toBe(2);
  });

  it('records the tokens of the request as sent, although the host appended to its messages right after', async () => {
    await using tt = await open();
    const task = () => [{ role: 'user', content: 'count exactly these words' }] as Record<string, unknown>[];
    const messages = task();
    await tt.reduceRequest({ model: 'gpt-4o', messages }, { sessionId: 'host', requestId: 'r1' });
    messages.push({ role: 'assistant', content: 'a long answer '.repeat(50) });
    await tt.reduceRequest({ model: 'gpt-4o', messages: task() }, { sessionId: 'same-request', requestId: 'r1' });
    await tt.settled();
    const [host, same] = turns();
    expect(host![0]).toBe('host');
    expect(host![2]).toBe(same![2]);
  });

  it('a failing metrics write never reaches the caller, and the ledger and later calls still record', async () => {
    const rejections: unknown[] = [];
    const onRejection = (reason: unknown): void => void rejections.push(reason);
    process.on('unhandledRejection', onRejection);
    try {
      await using tt = await open();
      const real = tt.vault.recordRequestMetric;
      const realBatch = tt.vault.recordRequestMetrics;
      tt.vault.recordRequestMetric = () => Promise.reject(new Error('metrics store down'));
      tt.vault.recordRequestMetrics = () => Promise.reject(new Error('metrics store down'));
      const out = await tt.reduceRequest(request('hello'), { sessionId: 's', requestId: 'r1' });
      expect(out.value['messages']).toEqual(request('hello')['messages']);
      await expect(tt.settled()).resolves.toBeUndefined();
      tt.vault.recordRequestMetric = real;
      tt.vault.recordRequestMetrics = realBatch;
      await tt.reduceRequest(request('again'), { sessionId: 's', requestId: 'r2' });
      await tt.settled();
      await hop();
      expect(turns().map(([, t]) => t)).toEqual(['r1', 'r2']);
      expect(readMetricsSummary(vaultPath).requests).toBe(1);
      expect(rejections).toEqual([]);
    } finally {
      process.off('unhandledRejection', onRejection);
    }
  });

  it('bounds its backlog: past telemetryBacklog waiting records a call waits for them; every record is still written', async () => {
    const backlog = 3;
    await using tt = await createTerminator({ env: {}, overrides: { dbPath: vaultPath }, telemetryBacklog: backlog });
    const write = tt.vault.recordRequestMetrics.bind(tt.vault);
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    let entered!: () => void;
    const blocked = new Promise<void>((resolve) => (entered = resolve));
    // A metrics store that has stopped answering (a long lock, a slow disk).
    tt.vault.recordRequestMetrics = async (rows) => {
      entered();
      await gate;
      return write(rows);
    };
    const answered: string[] = [];
    const sessions = ['a', 'b'].map(async (s) => {
      for (let i = 1; i <= 10; i++) {
        await tt.reduceRequest(request(`${s} ${i}`), { sessionId: s, requestId: `${s}${i}` });
        answered.push(`${s}${i}`);
      }
    });
    await blocked;
    // However long the store hangs, the calls stop at the bound (the pause only gives an unbounded
    // queue time to show itself: it cannot make this fail).
    for (let i = 0; i < 20; i++) await hop();
    await new Promise((resolve) => setTimeout(resolve, 100));
    const whileHung = answered.length;
    open();
    await Promise.all(sessions);
    await tt.settled();
    expect(whileHung).toBeLessThanOrEqual(backlog + 2 - 1);
    expect(answered).toHaveLength(20);
    expect(readMetricsSummary(vaultPath).requests).toBe(20);
    expect(turns()).toHaveLength(20);
  });

  it('refuses a telemetryBacklog below 1 (ConfigError)', async () => {
    await expect(
      createTerminator({ env: {}, overrides: { dbPath: vaultPath }, telemetryBacklog: 0 }),
    ).rejects.toMatchObject({ code: 'E_CONFIG' });
  });
});
