import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { replaySessions, type RecordedSession, type ReplayFigures } from '../../src/replay/index.js';
import { readMetricsSummary } from '../support/metrics-summary.js';
import { searchMatches, searchSession } from '../support/sessions.js';

const big = searchMatches(900, 'match');
const session = (id: string): RecordedSession =>
  searchSession(id, big, [
    { role: 'assistant', content: 'looking closer' },
    { role: 'user', content: 'and?' },
    { role: 'assistant', content: 'found' },
  ]);

let dir: string;
let withSeries: ReplayFigures;
let without: ReplayFigures;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tt-replay-series-'));
  withSeries = await replaySessions([session('one'), session('two')], {
    series: true,
    db: join(dir, 'v.sqlite3'),
    ledger: false,
  });
  without = await replaySessions([session('one')], { ledger: false });
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('replay series', () => {
  it('adds one point per request to each session, summing to the session figures', () => {
    for (const s of withSeries.sessions) {
      const points = s.per_request!;
      expect(points).toHaveLength(s.requests);
      expect(points.reduce((n, p) => n + p.raw_tokens, 0)).toBe(s.raw_tokens);
      expect(points.reduce((n, p) => n + p.final_tokens, 0)).toBe(s.final_tokens);
      expect(points.reduce((n, p) => n + p.raw_chars, 0)).toBe(s.raw_chars);
      expect(points.reduce((n, p) => n + p.receipts, 0)).toBe(s.receipts);
    }
  });

  it('reports the chars each mechanism saved per request, as the metrics rows do', () => {
    const fromPoints: Record<string, number> = {};
    for (const s of withSeries.sessions)
      for (const p of s.per_request!)
        for (const [k, v] of Object.entries(p.saved_by_stage)) fromPoints[k] = (fromPoints[k] ?? 0) + v;
    expect(Object.keys(fromPoints).length).toBeGreaterThan(0);
    expect(fromPoints).toEqual(readMetricsSummary(join(dir, 'v.sqlite3')).saved_by_stage);
  });

  it('leaves the default figures without a series', () => {
    expect(without.sessions[0]).not.toHaveProperty('per_request');
  });
});
