import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseHTML } from 'linkedom';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { capture } from '../support/cli.js';
import {
  costProfiles,
  parseReportInput,
  readVaultFigures,
  renderReport,
  ReportInputError,
} from '../../src/report/index.js';
import { replaySessions } from '../../src/replay/index.js';
import { sessionStateKey } from '../../src/step.js';
import { createVault } from '../../src/vault/index.js';
import { readMetricsSummary } from '../support/metrics-summary.js';
import { CANARY } from './fixture.js';
import { searchMatches, searchSession } from '../support/sessions.js';

const minimal = {
  requests: 2,
  raw_tokens: 300,
  final_tokens: 100,
  sessions: [{ id: 's<1>', requests: 2, raw_tokens: 300, final_tokens: 100 }],
};
const doc = (html: string) => parseHTML(html).document;

let dir: string;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tt-report-'));
  const big = searchMatches(600, CANARY, 'q');
  const session = (id: string) =>
    searchSession(
      id,
      big,
      [
        { role: 'assistant', content: 'one more look' },
        { role: 'assistant', content: 'found' },
      ],
      { content: null, pattern: 'x' },
    );
  await replaySessions([session('a'), session('b')], { db: join(dir, 'v.sqlite3'), ledger: false });
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('renderReport', () => {
  it('says "not measured" for every figure the input lacks, and draws no chart for it', () => {
    const d = doc(renderReport(parseReportInput(minimal)));
    for (const id of ['tokens', 'savings', 'cost', 'fidelity']) {
      expect(d.querySelector(`#${id}`)!.textContent).toContain('not measured');
      expect(d.querySelector(`#${id} svg`)).toBeNull();
    }
    expect(d.querySelectorAll('#fidelity tbody .na')).toHaveLength(7);
  });

  it('shows sight at use and the cost with simulated recoveries beside the plain ratio', () => {
    const d = doc(
      renderReport(
        parseReportInput({
          ...minimal,
          use_lines_pct: 85.14,
          use_words_pct: 81.67,
          simulated_recoveries: 54,
          effective_cost_ratio_openai: 0.61,
          effective_cost_with_recoveries_ratio_openai: 0.6512,
        }),
      ),
    );
    const at = (key: string): string | undefined =>
      d.querySelector(`[data-key="${key}"]`)?.getAttribute('data-value') ?? undefined;
    expect(at('use_lines_pct')).toBe('85.14');
    expect(at('use_words_pct')).toBe('81.67');
    expect(at('effective_cost_with_recoveries_ratio_openai')).toBe('0.6512');
    expect(d.querySelector('#cost')!.textContent).toContain('54 of the recorded actions');
    // The summary leads with it, as replay's summary line does: the net cost comes before the plain one.
    const summary = d.querySelector('#summary')!;
    const tiles = [...summary.querySelectorAll('dt')].map((t) => t.textContent);
    expect(tiles.indexOf('cost net of recoveries')).toBeGreaterThanOrEqual(0);
    expect(tiles.indexOf('cost net of recoveries')).toBeLessThan(tiles.indexOf('effective cost'));
    expect(summary.querySelector('[data-key="effective_cost_with_recoveries_ratio_openai"]')).not.toBeNull();
  });

  it('never shows a negative saving as "fewer": it says the reduction cost more than it saved, and why', () => {
    const grown = { ...minimal, raw_tokens: 100, final_tokens: 195, reduction_pct: -95, recovery_calls: 1 };
    const text = doc(renderReport(parseReportInput(grown))).querySelector('#summary')!.textContent!;
    expect(text).not.toMatch(/fewer/);
    expect(text).not.toContain('-95');
    expect(text).toContain('the reduction cost more than it saved: 95 tokens more than the client sent');
    expect(text).toContain('the model had to recover hidden content (1 recovery calls)');
  });

  it('escapes session ids and titles', () => {
    const html = renderReport(
      parseReportInput({ ...minimal, sessions: [{ ...minimal.sessions[0], id: '<script>alert(1)</script>' }] }),
      { title: '<b>x</b>' },
    );
    expect(html).not.toContain('<script>alert(1)');
    expect(doc(html).querySelectorAll('script')).toHaveLength(1);
    expect(html).toContain('&lt;b&gt;x&lt;/b&gt;');
  });

  it('is a pure function of its input', () => {
    const f = parseReportInput(minimal);
    expect(renderReport(f)).toBe(renderReport(f));
  });

  it('reads pricing profiles however a replay names them', () => {
    expect(
      costProfiles({
        effective_cost_ratio: 0.5,
        effective_cost_ratio_openai: 0.52,
        effective_cost_ratios: { anthropic: 0.56 },
        effective_cost_raw: 9,
      }),
    ).toEqual([
      { name: 'replay cache-read price', ratio: 0.5, key: 'effective_cost_ratio' },
      { name: 'openai', ratio: 0.52, key: 'effective_cost_ratio_openai' },
      { name: 'anthropic', ratio: 0.56, key: 'effective_cost_ratios.anthropic' },
    ]);
  });

  it('rejects input that is not replay figures, naming the key', () => {
    expect(() => parseReportInput({ requests: 1, sessions: [] })).toThrow(ReportInputError);
    expect(() =>
      parseReportInput({ ...minimal, sessions: [{ id: 's', requests: -1, raw_tokens: 1, final_tokens: 1 }] }),
    ).toThrow(/sessions\.0\.requests/);
  });
});

describe('report from the vault', () => {
  it('reads one point per metrics row, summing to what stats reports', () => {
    const f = readVaultFigures(join(dir, 'v.sqlite3'));
    const s = readMetricsSummary(join(dir, 'v.sqlite3'));
    expect([f.requests, f.raw_tokens, f.final_tokens, f.sessions.length]).toEqual([
      s.requests,
      s.raw_tokens,
      s.final_tokens,
      s.sessions,
    ]);
    expect(f.sessions.map((x) => x.per_request!.length)).toEqual([3, 3]);
    expect(f.sessions[0]!.per_request![0]!.raw_tokens).toBeLessThan(f.sessions[0]!.per_request![1]!.raw_tokens);
  });

  it('names each session of a keyed tenant as <tenant>/<session id>, the local tenant\u2019s by its id', async () => {
    const path = join(dir, 'tenants.sqlite3');
    const vault = await createVault({ path });
    const row = { requestId: 'r1', mode: 'balanced', rawChars: 10, finalChars: 5, receipts: 0, failedOpen: false };
    await vault.recordRequestMetric({ ...row, sessionId: sessionStateKey({ tenant: 'k_abc', sessionId: 'h:run' }) });
    await vault.recordRequestMetric({ ...row, sessionId: sessionStateKey({ sessionId: 'local-1' }) });
    await vault.close();
    expect(
      readVaultFigures(path)
        .sessions.map((x) => x.id)
        .sort(),
    ).toEqual(['k_abc/h:run', 'local-1']);
  });

  it('writes a page with the vault\u2019s charts and none of the evidence it holds', async () => {
    const out = join(dir, 'r.html');
    const r = await capture(['report', '--db', join(dir, 'v.sqlite3'), '--out', out]);
    expect(r.code).toBe(0);
    const html = readFileSync(out, 'utf8');
    expect(html).not.toContain(CANARY);
    const d = doc(html);
    expect(d.querySelector('#tokens svg[role=img]')).not.toBeNull();
    expect(d.querySelector('#savings svg[role=img]')).not.toBeNull();
    expect(d.querySelector('#cost')!.textContent).toContain('not measured');
  });
});

describe('report CLI errors', () => {
  it.each([
    [['--db', 'a', '--from', 'b'], /not both/],
    [['--from', '/nonexistent/replay.json'], /no replay figures .*at \/nonexistent/],
    [['--db', '/nonexistent/v.sqlite3'], /no vault at/],
  ])('%j exits 2 with a clear message', async (argv, message) => {
    const r = await capture(['report', ...argv, '--out', join(dir, 'x.html')]);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(message);
  });

  it('a JSON file that is not replay figures exits 2 naming the key', async () => {
    writeFileSync(join(dir, 'bad.json'), JSON.stringify({ requests: 'many' }));
    const r = await capture(['report', '--from', join(dir, 'bad.json'), '--out', join(dir, 'x.html')]);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/not replay figures .*requests/);
  });
});
