import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { benchTotals } from '../../src/cli/commands/bench.js';
import { capture } from '../support/cli.js';
import { searchMatches, searchSession } from '../support/sessions.js';

let dir: string;
let sessions: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'tt-cli-replay-'));
  sessions = join(dir, 's.jsonl');
  const big = searchMatches(900, 'match');
  const line = (id: string) => JSON.stringify(searchSession(id, big, [{ role: 'assistant', content: 'found' }]));
  writeFileSync(sessions, `${line('one')}\n\n${line('two')}\n`);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('token-terminator replay / stats / compare', () => {
  it('replay --json prints exactly the figures keys plus sessions', async () => {
    const { code, out } = await capture(['replay', sessions, '--json', '--db', join(dir, 'v.sqlite3')]);
    expect(code).toBe(0);
    const f = JSON.parse(out) as Record<string, unknown> & { sessions: { id: string }[] };
    expect(Object.keys(f).sort()).toEqual(
      [
        'requests',
        'raw_chars',
        'final_chars',
        'raw_tokens',
        'final_tokens',
        'reduction_pct',
        'receipts',
        'recovered_exact',
        'recovery_failures',
        'cache_prefix_ratio_raw',
        'cache_prefix_ratio_final',
        'effective_cost_raw',
        'effective_cost_final',
        'effective_cost_ratio',
        'p50_ms',
        'p95_ms',
        'total_ms',
        'peak_rss_mb',
        'sessions',
        'task_visible_pct',
        'actions_visible_pct',
        'diagnostics_visible_pct',
        'grounding_pct',
        'prefix_reuse',
        'pricing_profile',
        'effective_cost_ratio_openai',
        'effective_cost_ratio_anthropic',
        'use_lines_pct',
        'use_words_pct',
        'actions_missing_use_pct',
        'simulated_recoveries',
        'effective_cost_with_recoveries_ratio',
        'effective_cost_with_recoveries_ratio_openai',
        'effective_cost_with_recoveries_ratio_anthropic',
        'fidelity',
      ].sort(),
    );
    expect(f['pricing_profile']).toBe('openai');
    expect(f.sessions.map((s) => s.id)).toEqual(['one', 'two']);
    expect(f['requests']).toBe(4);
    expect(f['recovery_failures']).toBe(0);
  });

  it('replay --limit 1 prints a readable table for one session', async () => {
    const { code, out } = await capture(['replay', sessions, '--limit', '1']);
    expect(code).toBe(0);
    expect(out).toContain('tokens (o200k_base)');
    expect(out).toContain('receipts recovered exactly');
    expect(out).toContain('task visible');
    expect(out).toContain('grounding strings visible');
  });

  it('replay ends with one summary line: the cost net of recoveries first, then tokens, then sight at use', async () => {
    const own = mkdtempSync(join(tmpdir(), 'tt-cli-summary-')); // its own ledger: the compare test counts the one in dir
    const { code, out } = await capture(['replay', sessions, '--json', '--db', join(own, 'v.sqlite3')]);
    rmSync(own, { recursive: true, force: true });
    expect(code).toBe(0);
    const f = JSON.parse(out) as { effective_cost_with_recoveries_ratio: number; raw_tokens: number };
    const table = await capture(['replay', sessions]);
    const last = table.out.trimEnd().split('\n').at(-1) ?? '';
    expect(last).toMatch(/^summary: \d+\.\d\d % (cheaper|MORE expensive) net of recoveries \(cost ratio \d\.\d{4}, /);
    expect(last).toContain(`cost ratio ${f.effective_cost_with_recoveries_ratio.toFixed(4)}`);
    expect(last).toContain(f.raw_tokens.toLocaleString('en-US'));
    expect(last.indexOf('net of recoveries')).toBeLessThan(last.indexOf('tokens ('));
    expect(last.indexOf('tokens (')).toBeLessThan(last.indexOf('sight at use'));
  });

  it('stats sums the metrics rows the replay wrote', async () => {
    const { code, out } = await capture(['stats', '--db', join(dir, 'v.sqlite3'), '--json']);
    expect(code).toBe(0);
    expect(JSON.parse(out)).toMatchObject({ requests: 4, sessions: 2 });
  });

  it('compare rejects identical modes and a missing ledger with exit 2', async () => {
    expect(
      (await capture(['compare', 'balanced', 'balanced', '--ledger', join(dir, 'experiments.sqlite3')])).code,
    ).toBe(2);
    expect((await capture(['compare', 'off', 'balanced', '--ledger', join(dir, 'none.sqlite3')])).code).toBe(2);
    const { code, out } = await capture([
      'compare',
      'off',
      'balanced',
      '--ledger',
      join(dir, 'experiments.sqlite3'),
      '--json',
    ]);
    expect(code).toBe(0);
    expect(JSON.parse(out)).toMatchObject({ b: { mode: 'balanced', sessions: 2 }, a: { sessions: 0 } });
  });

  it('replay of a missing file or a bad price exits 2', async () => {
    expect((await capture(['replay', join(dir, 'missing.jsonl')])).code).toBe(2);
    expect((await capture(['replay', sessions, '--cache-read-price', '2'])).code).toBe(2);
  });
});

describe('benchTotals', () => {
  it('sums the first seven cases only and rounds the reduction to 2 decimals', () => {
    const c = (raw: number, out: number) => ({
      name: 'x',
      raw_tokens: raw,
      output_tokens: out,
      reference_output_tokens: 0,
    });
    const cases = [c(100, 1), c(100, 2), c(100, 3), c(100, 4), c(100, 5), c(100, 6), c(100, 7), c(1000, 999)];
    expect(benchTotals(cases)).toEqual({ raw_tokens: 700, output_tokens: 28, token_reduction_pct: 96 });
  });
});
