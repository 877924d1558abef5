/**
 * What the proxy hands the pipeline (the StepContext: session, tenant as the key's digest, route)
 * and what it records for the replay-style figures (one metric row per client request, net of
 * recovery).
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { tenantOf } from '../../adapters/proxy/index.js';
import type { StepContext } from '../../src/step.js';
import { openLedger } from '../../src/telemetry/ledger.js';
import { readMetricsSummary } from '../support/metrics-summary.js';
import { recoveryCall, startHarness, testRunOutput, type Harness } from '../proxy/support/harness.js';
import { chat } from '../proxy/support/upstream.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const BIG = testRunOutput(500);
const history = (): OpenAI.Chat.ChatCompletionMessageParam[] => [
  { role: 'user', content: 'Run the tests.' },
  {
    role: 'assistant',
    content: null,
    tool_calls: [
      { id: 'run-1', type: 'function', function: { name: 'terminal', arguments: '{"command":"npm test"}' } },
    ],
  },
  { role: 'tool', tool_call_id: 'run-1', content: BIG },
];

describe('proxy context and figures', () => {
  it('passes the API key digest as the tenant and the request model as the route, never the key', async () => {
    h = await startHarness(() => chat.text('ok'));
    const seen: StepContext[] = [];
    const compile = h.proxy.terminator.reduceRequest.bind(h.proxy.terminator);
    (h.proxy.terminator as { reduceRequest: typeof compile }).reduceRequest = (request, context, signal) => {
      seen.push(context);
      return compile(request, context, signal);
    };
    await new OpenAI({ apiKey: 'sk-tenant-1', baseURL: `${h.url}/v1`, maxRetries: 0 }).chat.completions.create({
      model: 'gpt-4o',
      messages: history(),
    });
    expect(seen).toHaveLength(1);
    expect(seen[0]!.tenant).toBe(tenantOf({ authorization: 'Bearer sk-tenant-1' }));
    expect(JSON.stringify(seen[0])).not.toContain('sk-tenant-1');
    expect(seen[0]!.route).toMatchObject({ model: 'gpt-4o', provider: 'openai', endpoint: '/v1/chat/completions' });
    expect(seen[0]!.sessionId).toMatch(/^p_[0-9a-f]{32}$/);
  });

  it('records one metric row per client request whose sent size includes the recovery round', async () => {
    h = await startHarness((r, i) => (i === 0 ? chat.calls([recoveryCall(r.json)]) : chat.text('ok')));
    await new OpenAI({ apiKey: 'sk-figures', baseURL: `${h.url}/v1`, maxRetries: 0 }).chat.completions.create({
      model: 'gpt-4o',
      messages: history(),
    });
    await h.proxy.settled();
    const summary = readMetricsSummary(h.dbPath);
    expect(summary.requests).toBe(1);
    const [first, continuation] = h.upstream.requests;
    // Net of recovery: the row's final size covers the first request and the continuation.
    expect(summary.final_chars).toBeGreaterThan(continuation!.body.length);
    expect(summary.final_chars).toBeGreaterThan(first!.body.length);
    expect(summary.saved_by_stage['compressToolResult']).toBeGreaterThan(0);
  });

  it('writes the experiment ledger after the answer, one turn per client request, tokens net of recovery, and keeps the key out of it', async () => {
    h = await startHarness((r, i) => (i === 0 ? chat.calls([recoveryCall(r.json)]) : chat.text('ok')));
    const client = new OpenAI({
      apiKey: 'sk-ledger-key',
      baseURL: `${h.url}/v1`,
      maxRetries: 0,
      defaultHeaders: { 'x-token-terminator-session': 'ledger-run' },
    });
    const messages = history();
    const done = await client.chat.completions.create({ model: 'gpt-4o', messages });
    await client.chat.completions.create({
      model: 'gpt-4o',
      messages: [
        ...messages,
        done.choices[0]!.message as OpenAI.Chat.ChatCompletionMessageParam,
        { role: 'user', content: 'Thanks.' },
      ],
    });
    await h.proxy.settled();
    const rows = await h.proxy.terminator.vault.requestMetricRows();
    expect(rows).toHaveLength(2);
    const ledgerPath = join(dirname(h.dbPath), 'experiments.sqlite3');
    const ledger = await openLedger({ path: ledgerPath });
    try {
      const session = await ledger.session(rows[0]!.sessionId);
      expect(session).toMatchObject({
        mode: h.proxy.terminator.config.mode,
        initialModel: 'gpt-4o',
        turnCount: 2,
        requests: 2,
        contaminated: false,
      });
      // The same token figures as the metric rows: raw as the client sent it, final including the recovery round.
      expect(session!.rawTokens).toBe(rows.reduce((n, r) => n + (r.rawTokens ?? 0), 0));
      expect(session!.finalTokens).toBe(rows.reduce((n, r) => n + (r.finalTokens ?? 0), 0));
    } finally {
      await ledger.close();
    }
    expect(readFileSync(ledgerPath).includes(Buffer.from('sk-ledger-key'))).toBe(false);
  });
});
