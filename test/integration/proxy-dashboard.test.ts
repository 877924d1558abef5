/**
 * GET /dashboard: the proxy serves the report page live from its store's metric rows, over
 * loopback, content-free, behind the proxy token when one is set, each caller shown only its own
 * sessions (SQLite and PostgreSQL); one check in a real headless
 * Chromium (Debian's package) that the live page draws its charts with no console error.
 */
import { request as httpRequest } from 'node:http';
import OpenAI from 'openai';
import type { Browser } from 'playwright-core';
import { afterAll, afterEach, describe, expect, inject, it, onTestFinished } from 'vitest';
import { referencedArtifacts } from '../../src/receipts/index.js';
import { launchChromium, MISSING_CHROMIUM, skipBrowser } from '../support/chromium.js';
import { freshSchema } from '../support/postgres.js';
import { DIALECTS } from '../vault/dialects.js';
import { startHarness, testRunOutput, type Harness } from '../proxy/support/harness.js';
import { chat, type Recorded, type Reply } from '../proxy/support/upstream.js';

const CANARY = 'CANARY-dash-9c1f-never-rendered';
const KEY = 'sk-dashboard-key-4d2a0b';
let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

type Msg = OpenAI.Chat.ChatCompletionMessageParam;
const output = (seed: number): string =>
  testRunOutput(700, seed)
    .split('\n')
    .map((line, i) => (i % 50 === 0 ? `${line} ${CANARY}` : line))
    .join('\n');
const opening = (name: string, seed: number): Msg[] => [
  { role: 'system', content: 'You are a coding agent.' },
  { role: 'user', content: `Conversation ${name}: run the tests (${CANARY}).` },
  {
    role: 'assistant',
    content: null,
    tool_calls: [
      { id: `run-${name}`, type: 'function', function: { name: 'terminal', arguments: '{"command":"npm test"}' } },
    ],
  },
  { role: 'tool', tool_call_id: `run-${name}`, content: output(seed) },
];

/** Recover once in conversation A (when it sees a receipt), answer otherwise. */
function model(r: Recorded): Reply {
  const messages = (r.json?.['messages'] ?? []) as { role: string; content?: unknown; tool_call_id?: string }[];
  const isA = JSON.stringify(messages[1]?.content).includes('Conversation A');
  const recovered = messages.some((m) => m.role === 'tool' && String(m.tool_call_id).startsWith('tt-'));
  const ids = referencedArtifacts(r.body.toString('utf8').replace(/\\n/g, '\n'));
  if (isA && !recovered && ids.length > 0)
    return chat.calls([
      { id: 'tt-A', name: 'token_terminator', args: { action: 'artifact_get', artifact_id: ids[0]!, limit: 200_000 } },
    ]);
  return chat.text('done');
}

function get(
  url: string,
  path: string,
  method = 'GET',
  headers: Record<string, string> = {},
): Promise<{ status: number; type: string; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${url}${path}`, { method, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c: string) => (body += c));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type'] ?? ''), body }),
      );
    });
    req.on('error', reject);
    req.end();
  });
}

/** data-key → data-value of every tagged number in a section of the page. */
function shown(html: string, section: string): Map<string, number> {
  const start = html.indexOf(`<section id="${section}"`);
  const part = html.slice(start, html.indexOf('</section>', start));
  return new Map([...part.matchAll(/data-key="([^"]+)" data-value="([^"]+)"/g)].map((m) => [m[1]!, Number(m[2])]));
}

async function conversations(harness: Harness): Promise<void> {
  const client = new OpenAI({ apiKey: KEY, baseURL: `${harness.url}/v1`, maxRetries: 0 });
  for (const [name, seed] of [
    ['A', 1],
    ['B', 2],
  ] as const) {
    const history = opening(name, seed);
    const first = await client.chat.completions.create({ model: 'gpt-4o', messages: history });
    history.push(first.choices[0]!.message as Msg, { role: 'user', content: 'And now?' });
    await client.chat.completions.create({ model: 'gpt-4o', messages: history });
  }
  await harness.proxy.settled();
}

describe('GET /dashboard', () => {
  it('serves the report page drawn from the store\u2019s metric rows, with SVG charts and no request content', async () => {
    h = await startHarness(model);
    await conversations(h);
    // Asked with the key the conversations used: their sessions are this caller's own, so listed.
    const page = await get(h.url, '/dashboard', 'GET', { authorization: `Bearer ${KEY}` });
    expect(page.status).toBe(200);
    expect(page.type).toBe('text/html; charset=utf-8');
    expect(page.body.startsWith('<!doctype html>')).toBe(true);
    const charts = [...page.body.matchAll(/<svg\b[^>]*>/g)]
      .filter((m) => m[0].includes('role="img"'))
      .map((m) => /aria-label="([^"]+)"/.exec(m[0])?.[1]);
    expect(charts).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^Tokens per request in session /),
        'Cumulative chars saved by mechanism',
        'Receipts and recovery counts',
      ]),
    );

    // The numbers are the store's rows: four client requests in two sessions.
    const rows = await h.proxy.terminator.vault.requestMetricRows();
    expect(rows).toHaveLength(4);
    const summary = shown(page.body, 'summary');
    expect(summary.get('requests')).toBe(4);
    expect(summary.get('sessions')).toBe(2);
    expect(summary.get('raw_tokens')).toBe(rows.reduce((n, r) => n + (r.rawTokens ?? 0), 0));
    expect(summary.get('final_tokens')).toBe(rows.reduce((n, r) => n + (r.finalTokens ?? 0), 0));
    expect(summary.get('final_tokens')).toBeLessThan(summary.get('raw_tokens')!);
    const recovery = shown(page.body, 'recovery');
    expect(recovery.get('receipts')).toBe(rows.reduce((n, r) => n + r.receipts, 0));
    expect(recovery.get('receipts')).toBeGreaterThan(0);
    expect(recovery.get('recovery_calls')).toBe(1);
    // The recovery the model made is counted as an exact read (issue 53), in the summary too.
    expect(recovery.get('recovered_exact')).toBe(1);
    expect(summary.get('recovered_exact')).toBe(1);
    expect(recovery.get('recovery_tokens')).toBeGreaterThan(0);

    // Content-free: no tool output, user text or key, whole or in part.
    expect(page.body).not.toContain(CANARY);
    expect(page.body).not.toContain('case_1_');
    expect(page.body).not.toContain(KEY);
    expect(page.body).not.toContain(KEY.slice(3));
    expect(page.body).not.toContain('Conversation A');
    // No TOKEN_TERMINATOR_EQ_* price: no USD figure.
    expect(page.body).not.toContain('id="rate-card"');
  });

  it('prices the store’s tokens at the terminator’s TOKEN_TERMINATOR_EQ_* rate card', async () => {
    h = await startHarness(model, { overrides: { eqInputUsdPerM: 4, eqRateCard: 'proxy card' } });
    await conversations(h);
    const page = await get(h.url, '/dashboard');
    const rows = await h.proxy.terminator.vault.requestMetricRows();
    const raw = rows.reduce((n, r) => n + (r.rawTokens ?? 0), 0);
    const final = rows.reduce((n, r) => n + (r.finalTokens ?? 0), 0);
    const cost = shown(page.body, 'cost');
    expect(cost.get('rate_card.raw_usd')).toBeCloseTo((raw * 4) / 1e6, 9);
    expect(cost.get('rate_card.final_usd')).toBeCloseTo((final * 4) / 1e6, 9);
    expect(cost.get('rate_card.raw_usd')).toBeGreaterThan(0);
    expect(page.body).toContain('proxy card');
  });

  for (const dialect of DIALECTS)
    it(`lists only the caller's own sessions, by the names their clients gave, and never another tenant's ids (${dialect})`, async () => {
      const schema = dialect === 'postgres' ? await freshSchema(inject('pgUrl'), 'dashboard') : undefined;
      onTestFinished(async () => {
        await h?.close();
        h = undefined;
        await schema?.drop();
      });
      h = await startHarness(model, schema === undefined ? {} : { overrides: { dbUrl: schema.url } });
      const tenants = [
        { name: 'alpha-run', headers: { authorization: `Bearer ${KEY}` } },
        { name: 'beta-run', headers: { authorization: 'Bearer sk-dashboard-other-tenant' } },
        { name: 'gamma-run', headers: {} as Record<string, string> },
      ];
      for (const [i, t] of tenants.entries()) {
        const res = await fetch(`${h.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-token-terminator-session': t.name, ...t.headers },
          body: JSON.stringify({ model: 'gpt-4o', messages: opening(String(i), i + 5) }),
        });
        await res.text();
      }
      // A fourth conversation of the first key, without a session header: listed unnamed, not by content.
      const client = new OpenAI({ apiKey: KEY, baseURL: `${h.url}/v1`, maxRetries: 0 });
      await client.chat.completions.create({ model: 'gpt-4o', messages: opening('D', 9) });
      await h.proxy.settled();
      const rows = await h.proxy.terminator.vault.requestMetricRows();
      expect(new Set(rows.map((r) => r.sessionId)).size).toBe(4);
      const sessionsOf = (html: string): string[] =>
        [...html.matchAll(/<tr data-session="([^"]*)">/g)].map((m) => m[1]!).sort();
      for (const [i, t] of tenants.entries()) {
        const page = await get(h.url, '/dashboard', 'GET', t.headers);
        expect(page.status).toBe(200);
        expect(sessionsOf(page.body)).toEqual(i === 0 ? ['alpha-run', 'unnamed session 1'] : [t.name]);
        for (const other of tenants) if (other !== t) expect(page.body).not.toContain(other.name);
        // The totals still count every client; no stored id (tenant digests, prefix digests) shows.
        expect(shown(page.body, 'summary').get('sessions')).toBe(4);
        for (const r of rows) expect(page.body).not.toContain(r.sessionId.replace(/^\u001f\d+\u001f/, ''));
        expect(page.body).not.toMatch(/p_[0-9a-f]{32}|k_[0-9a-f]{12}/);
      }
    });

  it('answers HEAD, refuses other methods, sits behind the proxy token, and is a 503 when the store cannot be read', async () => {
    const token = 'proxy-token-dashboard-0123456789';
    h = await startHarness(model, { flags: { token } });
    expect((await get(h.url, '/dashboard')).status).toBe(401);
    expect((await get(h.url, '/metrics')).status).toBe(401);
    expect((await get(h.url, '/dashboard', 'GET', { 'x-token-terminator-token': 'wrong' })).status).toBe(401);
    const auth = { 'x-token-terminator-token': token };
    const head = await get(h.url, '/dashboard', 'HEAD', auth);
    expect([head.status, head.type, head.body]).toEqual([200, 'text/html; charset=utf-8', '']);
    expect((await get(h.url, '/dashboard', 'POST', auth)).status).toBe(405);
    // No request yet: the page still renders, saying what was not measured.
    expect((await get(h.url, '/dashboard', 'GET', auth)).body).toContain('not measured');
    h.proxy.terminator.vault.requestMetricRows = () => Promise.reject(new Error(`store down ${CANARY}`));
    const failed = await get(h.url, '/dashboard', 'GET', auth);
    expect(failed.status).toBe(503);
    expect(failed.body).not.toContain(CANARY);
    expect(h.upstream.requests).toHaveLength(0);
  });
});

describe.skipIf(skipBrowser)(
  `GET /dashboard in headless chromium${skipBrowser ? ` (skipped: ${MISSING_CHROMIUM})` : ''}`,
  () => {
    let browser: Browser | undefined;
    afterAll(async () => {
      await browser?.close();
    });

    it('draws every chart of the live page as a non-empty SVG, with no console error and nothing fetched', async () => {
      h = await startHarness(model);
      await conversations(h);
      browser = await launchChromium();
      const page = await browser.newPage({
        viewport: { width: 1100, height: 900 },
        extraHTTPHeaders: { authorization: `Bearer ${KEY}` },
      });
      const errors: string[] = [];
      page.on('console', (m) => {
        if (m.type() === 'error') errors.push(m.text());
      });
      page.on('pageerror', (e) => errors.push(String(e)));
      const target = `${h.url}/dashboard`;
      await page.route('**/*', (route) =>
        route.request().url() === target
          ? route.continue()
          : (errors.push(`network: ${route.request().url()}`), route.abort()),
      );
      const response = await page.goto(target);
      expect(response?.status()).toBe(200);
      const charts = await page.$$eval('figure.chart svg[role=img]', (svgs) =>
        svgs
          .filter(
            (s) => (s as unknown as { getBoundingClientRect(): { width: number } }).getBoundingClientRect().width > 0,
          )
          .map((s) => ({
            label: s.getAttribute('aria-label'),
            marks: s.querySelectorAll('path, rect, circle, line').length,
          })),
      );
      expect(charts.length).toBeGreaterThanOrEqual(3);
      for (const c of charts) expect(c.marks, String(c.label)).toBeGreaterThan(3);
      expect(await page.$eval('[data-key="requests"]', (e) => e.textContent)).toBe('4');
      expect(errors).toEqual([]);
    }, 120_000);
  },
);
