import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseHTML } from 'linkedom';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { capture } from '../support/cli.js';
import { loadConfig } from '../../src/config/index.js';
import { priceFigures, rateCardFromConfig, renderReport } from '../../src/report/index.js';

const HOME = '/home/tt-rate-card';
const figures = {
  requests: 2,
  raw_tokens: 2_000_000,
  final_tokens: 500_000,
  sessions: [{ id: 's1', requests: 2, raw_tokens: 2_000_000, final_tokens: 500_000 }],
};
const valueOf = (html: string, key: string): number | undefined => {
  const el = parseHTML(html).document.querySelector(`#cost [data-key="${key}"]`);
  return el === null ? undefined : Number(el.getAttribute('data-value'));
};

describe('the API-equivalent rate card (TOKEN_TERMINATOR_EQ_*)', () => {
  it('is absent by default, so the default report has no USD figure', () => {
    const config = loadConfig({ env: { HOME } });
    expect(rateCardFromConfig(config)).toBeUndefined();
    expect(renderReport(figures)).not.toContain('rate-card');
  });

  it('each EQ_* variable prices its own kind of token', () => {
    const config = loadConfig({
      env: {
        HOME,
        TOKEN_TERMINATOR_EQ_INPUT_USD_PER_M: '2.5',
        TOKEN_TERMINATOR_EQ_OUTPUT_USD_PER_M: '10',
        TOKEN_TERMINATOR_EQ_CACHE_READ_USD_PER_M: '0.25',
        TOKEN_TERMINATOR_EQ_CACHE_WRITE_USD_PER_M: '3',
        TOKEN_TERMINATOR_EQ_RATE_CARD: 'list price 2026',
      },
    });
    const card = rateCardFromConfig(config)!;
    expect(card.label).toBe('list price 2026');
    const lines = priceFigures(
      { ...figures, output_tokens: 100_000, cache_read_tokens: 4_000_000, cache_write_tokens: 1_000_000 },
      card,
    );
    expect(lines.map((l) => [l.item, l.usd])).toEqual([
      ['input, raw', 5],
      ['input, sent', 1.25],
      ['output', 1],
      ['cache reads', 1],
      ['cache writes', 3],
    ]);
  });

  it('the report prices raw and sent tokens at the card, labels it, and says what was not measured', () => {
    const card = rateCardFromConfig(
      loadConfig({ env: { HOME }, overrides: { eqInputUsdPerM: 3, eqRateCard: 'my <card>' } }),
    )!;
    const html = renderReport(figures, { rateCard: card });
    expect(valueOf(html, 'rate_card.raw_usd')).toBe(6);
    expect(valueOf(html, 'rate_card.final_usd')).toBe(1.5);
    expect(valueOf(html, 'rate_card.saved_usd')).toBe(4.5);
    const text = parseHTML(html).document.querySelector('#rate-card')!.textContent;
    expect(text).toContain('my <card>');
    expect(text).toContain('not measured');
    expect(text).toContain('not what an OAuth or subscription plan actually charges');
    expect(html).not.toContain('my <card>');
  });
});

describe('token-terminator report with TOKEN_TERMINATOR_EQ_*', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'tt-rate-card-'));
    writeFileSync(join(dir, 'figures.json'), JSON.stringify(figures));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  afterEach(() => vi.unstubAllEnvs());

  const render = async (): Promise<string> => {
    const out = join(dir, 'r.html');
    const r = await capture(['report', '--from', join(dir, 'figures.json'), '--out', out]);
    expect(r.code).toBe(0);
    return readFileSync(out, 'utf8');
  };

  it('reads the rate card from the environment', async () => {
    expect(valueOf(await render(), 'rate_card.raw_usd')).toBeUndefined();
    vi.stubEnv('TOKEN_TERMINATOR_EQ_INPUT_USD_PER_M', '2');
    vi.stubEnv('TOKEN_TERMINATOR_EQ_RATE_CARD', 'env card');
    const html = await render();
    expect(valueOf(html, 'rate_card.raw_usd')).toBe(4);
    expect(valueOf(html, 'rate_card.final_usd')).toBe(1);
    expect(parseHTML(html).document.querySelector('#rate-card')!.textContent).toContain('env card');
  });
});
