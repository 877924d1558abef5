import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LedgerError, openLedger, type Ledger } from '../../src/telemetry/ledger.js';

let dir: string;
let ledger: Ledger;
beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tt-ledger-'));
  ledger = await openLedger({ path: join(dir, 'experiments.sqlite3') });
});
afterEach(async () => {
  await ledger.close();
  rmSync(dir, { recursive: true, force: true });
});

async function turn(
  l: Ledger,
  sessionId: string,
  mode: string,
  usage: { inputTokens: number; outputTokens: number; cacheReadTokens: number; reasoningTokens?: number },
  prompt = 'Fix the failing test.',
): Promise<void> {
  await l.startTurn({ sessionId, turnId: 't1', mode, model: 'gpt-4o', prompt });
  await l.finishTurn({ sessionId, turnId: 't1', usage, outcome: 'completed' });
}

describe('experiment ledger', async () => {
  it('compares two modes: medians 170 and 215, delta 45, one matched pair (reference vector)', async () => {
    await turn(ledger, 'n1', 'native', { inputTokens: 100, outputTokens: 20, cacheReadTokens: 50 });
    await turn(ledger, 'b1', 'balanced', { inputTokens: 130, outputTokens: 25, cacheReadTokens: 60 });
    const c = await ledger.compare('native', 'balanced');
    expect(c.a).toMatchObject({ mode: 'native', sessions: 1, turns: 1, medianTotalTokens: 170, meanTotalTokens: 170 });
    expect(c.b).toMatchObject({ mode: 'balanced', sessions: 1, medianTotalTokens: 215 });
    expect(c.delta).toEqual({ available: true, meanTotalTokens: 45, medianTotalTokens: 45 });
    expect(c.matchedTurns).toEqual({ pairs: 1, meanDelta: 45, medianDelta: 45 });
  });

  it('does not add reasoning tokens to totals (they are part of output)', async () => {
    await turn(ledger, 's', 'native', { inputTokens: 100, outputTokens: 50, cacheReadTokens: 0, reasoningTokens: 40 });
    expect((await ledger.session('s'))?.totalTokens).toBe(150);
  });

  it('contaminates a session whose mode or model changes, and excludes it from comparisons', async () => {
    await turn(ledger, 'm', 'native', { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0 });
    await ledger.ensureSession({ sessionId: 'm', mode: 'balanced', model: 'gpt-4o' });
    expect(await ledger.session('m')).toMatchObject({
      mode: 'native',
      contaminated: true,
      contaminationReason: 'runtime mode changed from native to balanced',
    });
    await turn(ledger, 'x', 'balanced', { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0 });
    await ledger.ensureSession({ sessionId: 'x', mode: 'balanced', model: 'gpt-4o-mini' });
    expect(await ledger.session('x')).toMatchObject({
      contaminated: true,
      contaminationReason: 'model changed within session',
    });
    const c = await ledger.compare('native', 'balanced');
    expect(c.excludedContaminatedSessions).toBe(2);
    expect(c.a.sessions).toBe(0);
    expect(c.delta.available).toBe(false);
  });

  it('records a one-request turn in one call exactly as the four calls do', async () => {
    const input = {
      mode: 'balanced',
      model: 'gpt-4o',
      experiment: 'e1',
      prompt: 'Fix the failing test.',
      rawTokens: 900,
      finalTokens: 300,
      usage: { inputTokens: 300 },
      outcome: 'completed' as const,
    };
    for (const t of ['t1', 't2']) {
      await ledger.ensureSession({
        sessionId: 'four',
        mode: input.mode,
        model: input.model,
        experiment: input.experiment,
      });
      await ledger.startTurn({
        sessionId: 'four',
        turnId: t,
        mode: input.mode,
        model: input.model,
        prompt: input.prompt,
      });
      await ledger.recordRequest({
        sessionId: 'four',
        turnId: t,
        rawTokens: input.rawTokens,
        finalTokens: input.finalTokens,
      });
      await ledger.finishTurn({ sessionId: 'four', turnId: t, usage: input.usage, outcome: input.outcome });
      await ledger.recordTurn({ sessionId: 'one', turnId: t, ...input });
    }
    const { sessionId: _a, ...four } = (await ledger.session('four'))!;
    const { sessionId: _b, ...one } = (await ledger.session('one'))!;
    expect(one).toEqual(four);
    expect(one).toMatchObject({
      experiment: 'e1',
      turnCount: 2,
      requests: 2,
      rawTokens: 1800,
      finalTokens: 600,
      totalTokens: 600,
      contaminated: false,
    });
    // Same prompt fingerprint and model: the turns pair across the two sessions like any others.
    await ledger.recordTurn({ sessionId: 'other', turnId: 't1', ...input, mode: 'native', experiment: 'e1' });
    expect((await ledger.compare('native', 'balanced', { experiment: 'e1' })).matchedTurns.pairs).toBe(1);
  });

  it('records a batch of turns as the same turns one call at a time do: repeats, a model change and two sessions interleaved', async () => {
    const base = {
      mode: 'balanced',
      experiment: 'e2',
      rawTokens: 50,
      finalTokens: 20,
      usage: { inputTokens: 20 },
      outcome: 'completed' as const,
    };
    const turns = [
      { turnId: 't1', model: 'gpt-4o', prompt: 'one', s: 'a' },
      { turnId: 't1', model: 'gpt-4o', prompt: 'one', s: 'b' },
      { turnId: 't2', model: 'gpt-4o', prompt: 'two', s: 'a' },
      { turnId: 't2', model: 'gpt-4o', prompt: 'two', s: 'a' }, // the same request again: one turn, two requests
      { turnId: 't3', model: 'gpt-4o-mini', prompt: 'three', s: 'a' },
      { turnId: 't4', model: 'gpt-4o', prompt: 'four', s: 'a' },
    ];
    for (const { s, ...t } of turns) await ledger.recordTurn({ ...base, ...t, sessionId: `one-${s}` });
    await ledger.recordTurns(turns.map(({ s, ...t }) => ({ ...base, ...t, sessionId: `batch-${s}` })));
    await ledger.recordTurns([]);
    for (const s of ['a', 'b']) {
      const { sessionId: _a, ...one } = (await ledger.session(`one-${s}`))!;
      const { sessionId: _b, ...batch } = (await ledger.session(`batch-${s}`))!;
      expect(batch).toEqual(one);
    }
    expect(await ledger.session('batch-a')).toMatchObject({
      turnCount: 4,
      requests: 5,
      rawTokens: 250,
      contaminated: true,
      contaminationReason: 'model changed within session',
    });
  });

  it('rejects identical modes', async () => {
    await expect(ledger.compare('balanced', 'balanced')).rejects.toThrow(LedgerError);
  });

  it('counts a turn once even if it is finished twice, and pairs only completed turns with the same prompt', async () => {
    await turn(ledger, 'a', 'native', { inputTokens: 10, outputTokens: 0, cacheReadTokens: 0 }, 'same task');
    await ledger.finishTurn({ sessionId: 'a', turnId: 't1', usage: { inputTokens: 999 }, outcome: 'failed' });
    await turn(ledger, 'b', 'balanced', { inputTokens: 7, outputTokens: 0, cacheReadTokens: 0 }, '  same   task ');
    await turn(ledger, 'c', 'balanced', { inputTokens: 7, outputTokens: 0, cacheReadTokens: 0 }, 'another task');
    expect(await ledger.session('a')).toMatchObject({ turnCount: 1, totalTokens: 10 });
    expect((await ledger.compare('native', 'balanced')).matchedTurns).toMatchObject({ pairs: 1, meanDelta: -3 });
  });

  it('adds request token counts to the session and keeps the file private', async () => {
    await ledger.ensureSession({ sessionId: 'r', mode: 'balanced' });
    await ledger.recordRequest({ sessionId: 'r', rawTokens: 100, finalTokens: 40 });
    await ledger.recordRequest({ sessionId: 'r', rawTokens: 50, finalTokens: 20 });
    expect(await ledger.session('r')).toMatchObject({ requests: 2, rawTokens: 150, finalTokens: 60 });
    expect(statSync(join(dir, 'experiments.sqlite3')).mode & 0o777).toBe(0o600);
  });
});
