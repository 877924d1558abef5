import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LedgerError, openLedger, type Ledger } from '../../src/telemetry/ledger.js';

let dir: string;
let ledger: Ledger;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'tt-ledger-'));
  ledger = openLedger({ path: join(dir, 'experiments.sqlite3') });
});
afterEach(() => {
  ledger.close();
  rmSync(dir, { recursive: true, force: true });
});

function turn(l: Ledger, sessionId: string, mode: string, usage: { inputTokens: number; outputTokens: number; cacheReadTokens: number; reasoningTokens?: number }, prompt = 'Fix the failing test.'): void {
  l.startTurn({ sessionId, turnId: 't1', mode, model: 'gpt-4o', prompt });
  l.finishTurn({ sessionId, turnId: 't1', usage, outcome: 'completed' });
}

describe('experiment ledger', () => {
  it('compares two modes: medians 170 and 215, delta 45, one matched pair (reference vector)', () => {
    turn(ledger, 'n1', 'native', { inputTokens: 100, outputTokens: 20, cacheReadTokens: 50 });
    turn(ledger, 'b1', 'balanced', { inputTokens: 130, outputTokens: 25, cacheReadTokens: 60 });
    const c = ledger.compare('native', 'balanced');
    expect(c.a).toMatchObject({ mode: 'native', sessions: 1, turns: 1, medianTotalTokens: 170, meanTotalTokens: 170 });
    expect(c.b).toMatchObject({ mode: 'balanced', sessions: 1, medianTotalTokens: 215 });
    expect(c.delta).toEqual({ available: true, meanTotalTokens: 45, medianTotalTokens: 45 });
    expect(c.matchedTurns).toEqual({ pairs: 1, meanDelta: 45, medianDelta: 45 });
  });

  it('does not add reasoning tokens to totals (they are part of output)', () => {
    turn(ledger, 's', 'native', { inputTokens: 100, outputTokens: 50, cacheReadTokens: 0, reasoningTokens: 40 });
    expect(ledger.session('s')?.totalTokens).toBe(150);
  });

  it('contaminates a session whose mode or model changes, and excludes it from comparisons', () => {
    turn(ledger, 'm', 'native', { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0 });
    ledger.ensureSession({ sessionId: 'm', mode: 'balanced', model: 'gpt-4o' });
    expect(ledger.session('m')).toMatchObject({ mode: 'native', contaminated: true, contaminationReason: 'runtime mode changed from native to balanced' });
    turn(ledger, 'x', 'balanced', { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0 });
    ledger.ensureSession({ sessionId: 'x', mode: 'balanced', model: 'gpt-4o-mini' });
    expect(ledger.session('x')).toMatchObject({ contaminated: true, contaminationReason: 'model changed within session' });
    const c = ledger.compare('native', 'balanced');
    expect(c.excludedContaminatedSessions).toBe(2);
    expect(c.a.sessions).toBe(0);
    expect(c.delta.available).toBe(false);
  });

  it('rejects identical modes', () => {
    expect(() => ledger.compare('balanced', 'balanced')).toThrow(LedgerError);
  });

  it('counts a turn once even if it is finished twice, and pairs only completed turns with the same prompt', () => {
    turn(ledger, 'a', 'native', { inputTokens: 10, outputTokens: 0, cacheReadTokens: 0 }, 'same task');
    ledger.finishTurn({ sessionId: 'a', turnId: 't1', usage: { inputTokens: 999 }, outcome: 'failed' });
    turn(ledger, 'b', 'balanced', { inputTokens: 7, outputTokens: 0, cacheReadTokens: 0 }, '  same   task ');
    turn(ledger, 'c', 'balanced', { inputTokens: 7, outputTokens: 0, cacheReadTokens: 0 }, 'another task');
    expect(ledger.session('a')).toMatchObject({ turnCount: 1, totalTokens: 10 });
    expect(ledger.compare('native', 'balanced').matchedTurns).toMatchObject({ pairs: 1, meanDelta: -3 });
  });

  it('adds request token counts to the session and keeps the file private', () => {
    ledger.ensureSession({ sessionId: 'r', mode: 'balanced' });
    ledger.recordRequest({ sessionId: 'r', rawTokens: 100, finalTokens: 40 });
    ledger.recordRequest({ sessionId: 'r', rawTokens: 50, finalTokens: 20 });
    expect(ledger.session('r')).toMatchObject({ requests: 2, rawTokens: 150, finalTokens: 60 });
    expect(statSync(join(dir, 'experiments.sqlite3')).mode & 0o777).toBe(0o600);
  });
});
