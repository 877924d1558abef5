/**
 * The report in a real headless Chromium (Debian's package, driven by playwright-core through its
 * executable path; never a downloaded build). One launch for every check.
 *
 * Without a browser: in CI (CI set) this fails, because .ci/run installs chromium and a missing
 * browser there is a broken pipeline; on a developer's clone it is skipped, visibly, with how to
 * enable it (a missing system package should not fail `npm test` for a contributor who did not
 * touch the report). A browser that is found but cannot start always fails.
 */
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { run } from '../../src/cli/program.js';
import { chromiumExecutable, launchChromium, MISSING_CHROMIUM, skipBrowser } from '../support/chromium.js';
import { CANARY, reportFixture } from './fixture.js';

const executable = chromiumExecutable;
const MISSING = MISSING_CHROMIUM;
/** Where the screenshot goes (gitignored): a test artifact, not a fixture. */
export const SCREENSHOT = resolve('test-results/report.png');
const SLOW = 180_000;

if (skipBrowser) console.warn(`report browser test skipped: ${MISSING}`);

const skipAll = skipBrowser;
// In CI without a browser, only the first test runs, and it fails with MISSING.
const needsBrowser = it.skipIf(executable === undefined);

describe.skipIf(skipAll)(`report in headless chromium${skipAll ? ` (skipped: ${MISSING})` : ''}`, () => {
  let dir: string;
  let figures: Awaited<ReturnType<typeof reportFixture>>;
  let browser: Browser | undefined;
  let page: Page;
  const errors: string[] = [];

  beforeAll(async () => {
    if (executable === undefined) return;
    dir = mkdtempSync(join(tmpdir(), 'tt-report-browser-'));
    figures = await reportFixture(resolve('examples/sessions/sample.jsonl'));
    writeFileSync(join(dir, 'replay.json'), JSON.stringify(figures));
    const out = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    try {
      expect(await run(['report', '--from', join(dir, 'replay.json'), '--out', join(dir, 'report.html')])).toBe(0);
    } finally {
      out.mockRestore();
    }
  }, SLOW);

  afterAll(async () => {
    await browser?.close();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it(
    'finds and starts a Chromium, and opens the report in it',
    async () => {
      expect(executable, MISSING).toBeDefined();
      browser = await launchChromium();
      page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
      page.on('console', (m) => {
        if (m.type() === 'error') errors.push(m.text());
      });
      page.on('pageerror', (e) => errors.push(String(e)));
      // Nothing may be fetched: the page is self-contained.
      await page.route('**/*', (route) =>
        route.request().url().startsWith('file:')
          ? route.continue()
          : (errors.push(`network: ${route.request().url()}`), route.abort()),
      );
      await page.goto(pathToFileURL(join(dir, 'report.html')).href);
    },
    SLOW,
  );

  needsBrowser('draws every chart as a non-empty SVG with visible marks', async () => {
    const charts = await page.$$eval('figure.chart svg[role=img]', (svgs) =>
      svgs
        .filter((s) => (s as unknown as Boxed).getBoundingClientRect().width > 0)
        .map((s) => {
          const box = (s as unknown as Boxed).getBoundingClientRect();
          const marks = [...s.querySelectorAll('path, rect, circle, line')].filter((m) => {
            const b = (m as unknown as { getBBox(): { width: number; height: number } }).getBBox();
            return b.width > 0 || b.height > 0;
          });
          return {
            label: s.getAttribute('aria-label'),
            width: box.width,
            height: box.height,
            marks: marks.length,
            texts: s.querySelectorAll('text').length,
          };
        }),
    );
    expect(charts.map((c) => c.label)).toEqual([
      expect.stringMatching(/^Tokens per request in session /),
      'Cumulative chars saved by mechanism',
      'Effective cost with prompt caching, by pricing profile',
      'Fidelity figures in percent',
      'Receipts and recovery counts',
    ]);
    for (const c of charts) {
      expect(c.width).toBeGreaterThan(200);
      expect(c.height).toBeGreaterThan(50);
      expect(c.marks).toBeGreaterThan(3);
      expect(c.texts).toBeGreaterThan(2); // axis labels and ticks
    }
  });

  needsBrowser('shows the replay JSON\u2019s numbers: totals, profiles, fidelity, recovery', async () => {
    const shown = await page.$$eval(
      '#summary [data-key], #cost [data-key], #fidelity [data-key], #recovery [data-key]',
      (els) => els.map((e) => ({ key: e.getAttribute('data-key')!, text: e.textContent! })),
    );
    const expected = (key: string): unknown =>
      key === 'saved_tokens'
        ? (figures['raw_tokens'] as number) - (figures['final_tokens'] as number)
        : key === 'sessions'
          ? figures.sessions.length
          : figures[key];
    expect(shown.length).toBeGreaterThan(20);
    for (const { key, text } of shown) expect([key, parse(text)]).toEqual([key, expected(key)]);
    const keys = new Set(shown.map((s) => s.key));
    for (const k of [
      'task_visible_pct',
      'actions_visible_pct',
      'diagnostics_visible_pct',
      'grounding_pct',
      'prefix_reuse',
      'effective_cost_ratio',
      'effective_cost_ratio_openai',
      'effective_cost_ratio_anthropic',
      'receipts',
      'recovered_exact',
      'recovery_failures',
    ]) {
      expect(keys).toContain(k);
    }
  });

  needsBrowser('shows every session\u2019s figures in the table, sorted by saving, and sorts on a click', async () => {
    const rows = () =>
      page.$$eval('#session-table tbody tr', (trs) =>
        trs.map((tr) => ({
          id: tr.getAttribute('data-session')!,
          cells: [...tr.querySelectorAll('[data-key]')].map((c) => ({
            key: c.getAttribute('data-key')!,
            text: c.textContent!,
          })),
        })),
      );
    const initial = await rows();
    expect(initial.map((r) => r.id).sort()).toEqual(figures.sessions.map((s) => s['id'] as string).sort());
    const saved = (id: string) => {
      const s = figures.sessions.find((x) => x['id'] === id)!;
      return (s['raw_tokens'] as number) - (s['final_tokens'] as number);
    };
    expect(initial.map((r) => saved(r.id))).toEqual(initial.map((r) => saved(r.id)).sort((a, b) => b - a));
    for (const r of initial) {
      const s = figures.sessions.find((x) => x['id'] === r.id)!;
      for (const c of r.cells)
        expect([r.id, c.key, parse(c.text)]).toEqual([r.id, c.key, c.key === 'saved_tokens' ? saved(r.id) : s[c.key]]);
    }
    await page.click('#session-table button[data-sort="reduction_pct"]');
    const byPct = (await rows()).map((r) => figures.sessions.find((x) => x['id'] === r.id)!['reduction_pct'] as number);
    expect(byPct).toEqual([...byPct].sort((a, b) => b - a));
    await page.click('#session-table button[data-sort="reduction_pct"]');
    const ascending = (await rows()).map(
      (r) => figures.sessions.find((x) => x['id'] === r.id)!['reduction_pct'] as number,
    );
    expect(ascending).toEqual([...ascending].sort((a, b) => a - b));
  });

  needsBrowser('plots each session\u2019s requests, and the picker switches sessions', async () => {
    const visible = async () =>
      page.$$eval('.session-panel', (ps) =>
        ps
          .filter((p) => !(p as unknown as { hidden: boolean }).hidden)
          .map((p) => ({
            id: p.getAttribute('data-session')!,
            rows: [...p.querySelectorAll('tbody tr')].map((tr) =>
              [...tr.querySelectorAll('[data-key]')].map((c) => c.textContent!),
            ),
          })),
      );
    const first = await visible();
    expect(first).toHaveLength(1);
    const session = figures.sessions.find((s) => s['id'] === first[0]!.id)! as {
      per_request: { raw_tokens: number; final_tokens: number }[];
    };
    expect(first[0]!.rows.map((r) => r.map(parse))).toEqual(
      session.per_request.map((p) => [p.raw_tokens, p.final_tokens, p.raw_tokens - p.final_tokens]),
    );
    await page.selectOption('#session-pick', '1');
    const second = await visible();
    expect(second).toHaveLength(1);
    expect(second[0]!.id).not.toBe(first[0]!.id);
    const width = await page.$eval(
      `.session-panel:not([hidden]) svg[role=img]`,
      (s) => s.getBoundingClientRect().width,
    );
    expect(width).toBeGreaterThan(200);
    await page.selectOption('#session-pick', '0');
  });

  needsBrowser(
    'logs no console error, fetches nothing, shows no evidence content, and leaves a screenshot',
    async () => {
      expect(errors).toEqual([]);
      expect(await page.content()).not.toContain(CANARY);
      mkdirSync(resolve('test-results'), { recursive: true });
      rmSync(SCREENSHOT, { force: true });
      await page.screenshot({ path: SCREENSHOT, fullPage: true });
      expect(statSync(SCREENSHOT).size).toBeGreaterThan(20_000);
    },
  );
});

/** The DOM slice the page checks use (the project compiles without the DOM lib). */
interface Boxed {
  getBoundingClientRect(): { width: number; height: number };
}

/** A shown number back to a number: grouping commas and a unit suffix removed. */
function parse(text: string): number {
  return Number(text.replace(/,/g, '').replace(/\s*%$/, '').trim());
}
