/**
 * The gateway measures as every host does (src/telemetry/request-account.ts): each answered
 * request's log line carries its raw and sent tokens, the stages that acted, its recovery rounds
 * and its session; its metric rows show a saving equal to what the upstream did not get (client
 * bodies against every request the upstream received, recovery rounds included), within 1 %, and
 * the tool stage is credited in every request that showed its rendering.
 */
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { canonicalJson, codePoints, createTiktokenCounter } from '../../src/measure/index.js';
import { tenantOf } from '../../adapters/proxy/request-identity.js';
import { referencedArtifacts } from '../../src/receipts/index.js';
import { recoveryCall, startHarness, type Harness } from '../proxy/support/harness.js';
import { chat, type Recorded } from '../proxy/support/upstream.js';

const PYTEST = readFileSync(new URL('../fixtures/readme-setups/pytest-30k.txt', import.meta.url), 'utf8');
const counter = createTiktokenCounter();

type Msg = { role: string; content: string | null; tool_call_id?: string; tool_calls?: unknown[] };
const opening: Msg[] = [
  { role: 'system', content: 'You fix tests.' },
  { role: 'user', content: 'Why does the parser test fail?' },
  {
    role: 'assistant',
    content: null,
    tool_calls: [{ id: 'c1', type: 'function', function: { name: 'bash', arguments: '{"command":"pytest"}' } }],
  },
  { role: 'tool', tool_call_id: 'c1', content: PYTEST },
];
const lastOf = (r: Recorded): Msg => (r.json!['messages'] as Msg[]).at(-1)!;
const script = (r: Recorded) => {
  const last = lastOf(r);
  if (last.role === 'user' && last.content === 'recover') return chat.calls([recoveryCall(r.json)]);
  return chat.text('answer');
};

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

function post(url: string, body: unknown): Promise<number> {
  return new Promise((done, fail) => {
    const req = request(
      `${url}/v1/chat/completions`,
      {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          authorization: 'Bearer sk-acct',
          'x-token-terminator-session': 'build-7',
        },
      },
      (res) => {
        res.resume();
        res.on('end', () => done(res.statusCode ?? 0));
      },
    );
    req.on('error', fail);
    req.end(JSON.stringify(body));
  });
}

const size = (v: unknown): { chars: number; tokens: number } => {
  const json = canonicalJson(v);
  return { chars: codePoints(json), tokens: counter.count(json) };
};

describe('gateway accounting', () => {
  it('logs each request with raw and sent tokens, stages, recovery rounds and session; its rows match what the upstream did not get', async () => {
    h = await startHarness(script);
    const bodies = [
      { model: 'gpt-4o', messages: opening },
      {
        model: 'gpt-4o',
        messages: [...opening, { role: 'assistant', content: 'answer' }, { role: 'user', content: 'recover' }],
      },
      {
        model: 'gpt-4o',
        // The conversation goes on from the recovered turn (a recovery rejoins only where it followed).
        messages: [
          ...opening,
          { role: 'assistant', content: 'answer' },
          { role: 'user', content: 'recover' },
          { role: 'assistant', content: 'the run, recovered' },
          { role: 'user', content: 'and?' },
        ],
      },
    ];
    for (const body of bodies) expect(await post(h.url, body)).toBe(200);
    await h.proxy.settled();

    const lines = h.logs.filter((l) => l.event === 'request' && l.api === 'chat');
    expect(lines).toHaveLength(3);
    for (const line of lines) {
      expect(line.status).toBe(200);
      // The name the client gave; the tenant is kept beside it (sessionStateKey), not in the name.
      expect(line.session).toBe('h:build-7');
      // Whose request: the tenant the credentials name (a digest of them, never the key).
      expect(line.tenant).toBe(tenantOf({ authorization: 'Bearer sk-acct' }));
      expect(typeof line.ms).toBe('number');
    }
    // The first two showed the reduced run; the recovered run then rejoined whole (no stage acted).
    for (const line of lines.slice(0, 2)) {
      expect(line.raw_tokens as number).toBeGreaterThan(line.sent_tokens as number);
      expect(line.stages).toBe('compressToolResult');
    }
    expect(lines[2]!.stages).toBe('');
    expect(lines[2]!.raw_tokens as number).toBeLessThanOrEqual(lines[2]!.sent_tokens as number);
    expect(lines.map((l) => l.recovery_rounds)).toEqual([0, 1, 0]);
    expect(lines[1]!.recovery_tokens as number).toBeGreaterThan(0);

    // What the upstream did not get: the client bodies against every request it received.
    const upstream = h.upstream.requests.map((r) => r.json);
    expect(upstream).toHaveLength(4);
    const raw = bodies.map(size);
    const sent = upstream.map(size);
    const sum = (xs: { chars: number; tokens: number }[], k: 'chars' | 'tokens'): number =>
      xs.reduce((n, x) => n + x[k], 0);
    const summary = await h.proxy.terminator.vault.metricsSummary();
    const near = (actual: number, expected: number, what: string): void =>
      expect(Math.abs(actual - expected) / Math.abs(expected), `${what}: ${actual} vs ${expected}`).toBeLessThanOrEqual(
        0.01,
      );
    near(summary.raw_chars - summary.final_chars, sum(raw, 'chars') - sum(sent, 'chars'), 'chars saved');
    // Token totals count each top-level value, not the keys between them (attribution's convention):
    // 5 to 15 tokens a request, which the recovery round's cost leaves a large share of a small
    // net saving. Within 1 % of what the upstream got, then.
    const tokensSaved = sum(raw, 'tokens') - sum(sent, 'tokens');
    expect(tokensSaved).toBeGreaterThan(0);
    expect(Math.abs(summary.raw_tokens - summary.final_tokens - tokensSaved)).toBeLessThanOrEqual(
      0.01 * sum(sent, 'tokens'),
    );
    // The reduced run reached the model in the first request and in the recovery round's first send.
    const runJson = codePoints(canonicalJson(PYTEST));
    let runSaved = 0;
    const whole = (upstream[3]!['messages'] as Msg[]).find((m) => m.role === 'tool' && m.tool_call_id === 'c1');
    expect(whole!.content).toBe(PYTEST);
    for (const body of upstream.slice(0, 2)) {
      const view = (body!['messages'] as Msg[]).find((m) => m.role === 'tool' && m.tool_call_id === 'c1')!.content!;
      expect(referencedArtifacts(view).length).toBeGreaterThan(0);
      runSaved += runJson - codePoints(canonicalJson(view));
    }
    near(summary.saved_by_stage['compressToolResult'] ?? 0, runSaved, 'compressToolResult credit');
  });
});
