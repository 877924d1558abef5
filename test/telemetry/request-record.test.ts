import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { recordRequestMetrics } from '../../src/telemetry/request-record.js';
import { createVault, type RequestMetric, type Vault } from '../../src/vault/index.js';

const metric = (requestId: string, rawChars = 100): RequestMetric =>
  Object.freeze({
    sessionId: 's',
    requestId,
    mode: 'balanced',
    rawChars,
    finalChars: 40,
    rawTokens: 25,
    finalTokens: 10,
    receipts: 1,
    failedOpen: false,
    savedByStage: { compile: 60 },
    components: { tool_outputs: { raw: 20, final: 5 } },
  });

describe('recordRequestMetrics (a batch of deferred metrics rows)', () => {
  let dir: string;
  let vault: Vault;
  const calls = { batch: 0, single: 0 };
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tt-request-record-'));
    vault = await createVault({ path: join(dir, 'v.sqlite3') });
    calls.batch = 0;
    calls.single = 0;
    const batch = vault.recordRequestMetrics;
    const single = vault.recordRequestMetric;
    vault.recordRequestMetrics = (...args) => (calls.batch++, batch(...args));
    vault.recordRequestMetric = (...args) => (calls.single++, single(...args));
  });
  afterEach(async () => {
    await vault.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('writes the rows of a batch in one call of the store', async () => {
    await recordRequestMetrics(vault, [metric('r1'), metric('r2'), metric('r3')]);
    expect(calls).toEqual({ batch: 1, single: 0 });
    const rows = await vault.requestMetricRows();
    expect(rows.map((r) => r.requestId)).toEqual(['r1', 'r2', 'r3']);
    expect((await vault.metricsSummary()).components).toEqual({
      tool_outputs: { raw_tokens: 60, final_tokens: 15, raw_pct: 100 },
    });
  });

  it('a row the store refuses loses only itself: the others are written one by one', async () => {
    await expect(recordRequestMetrics(vault, [metric('r1'), metric('bad', -1), metric('r3')])).resolves.toBeUndefined();
    expect((await vault.requestMetricRows()).map((r) => r.requestId)).toEqual(['r1', 'r3']);
    expect(calls).toEqual({ batch: 1, single: 3 });
  });

  it('never rejects, also when the store refuses every row', async () => {
    vault.recordRequestMetrics = () => Promise.reject(new Error('store down'));
    vault.recordRequestMetric = () => Promise.reject(new Error('store down'));
    await expect(recordRequestMetrics(vault, [metric('r1'), metric('r2')])).resolves.toBeUndefined();
    await expect(recordRequestMetrics(vault, [])).resolves.toBeUndefined();
  });
});
