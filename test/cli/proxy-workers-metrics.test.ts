/**
 * `token-terminator proxy --workers 2` through the real CLI: `/metrics` answers for the whole
 * gateway, whichever worker is asked. Requests and recovery calls spread over both workers (each
 * on a connection of its own, which node:cluster hands to the workers in turn) are all counted,
 * in every scrape.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { recoveryCall } from '../proxy/support/harness.js';
import { chat, startUpstream, type Recorded, type Reply } from '../proxy/support/upstream.js';
import { spawnProxy, stopProcess } from '../support/proxy-process.js';

const dir = mkdtempSync(join(tmpdir(), 'tt-proxy-workers-metrics-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const PYTEST = readFileSync(new URL('../fixtures/readme-setups/pytest-30k.txt', import.meta.url), 'utf8');
type Msg = { role: string; content: string | null; tool_call_id?: string; tool_calls?: unknown[] };
const opening = (i: number): Msg[] => [
  { role: 'system', content: `You fix tests (${i}).` },
  { role: 'user', content: 'Why does the parser test fail?' },
  {
    role: 'assistant',
    content: null,
    tool_calls: [{ id: `c${i}`, type: 'function', function: { name: 'bash', arguments: '{"command":"pytest"}' } }],
  },
  { role: 'tool', tool_call_id: `c${i}`, content: PYTEST },
];
const lastOf = (r: Recorded): Msg => (r.json!['messages'] as Msg[]).at(-1)!;
const script = (r: Recorded): Reply => {
  const last = lastOf(r);
  if (last.role === 'user' && last.content === 'recover') return chat.calls([recoveryCall(r.json)]);
  return chat.text('answer');
};

/** One request on a connection of its own: the primary hands each to the next worker. */
function send(url: string, method: string, path: string, body?: unknown): Promise<{ status: number; text: string }> {
  return new Promise((done, fail) => {
    const req = request(
      `${url}${path}`,
      {
        method,
        agent: false,
        headers: { 'content-type': 'application/json', authorization: 'Bearer sk-workers-metrics' },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => done({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', fail);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

const value = (metrics: string, line: string): number =>
  Number(new RegExp(`^${line.replace(/[{}"]/g, (c) => `\\${c}`)} (\\d+)`, 'm').exec(metrics)?.[1] ?? 0);

describe('token-terminator proxy --workers 2: /metrics', () => {
  it('counts every request and recovery call of both workers, whichever worker answers the scrape', async () => {
    const upstream = await startUpstream(script);
    const proxy = spawnProxy(
      ['--workers', '2', '--upstream', upstream.url, '--db', join(dir, 'vault.sqlite3'), '--quiet'],
      { PATH: process.env['PATH'] ?? '', HOME: dir, TOKEN_TERMINATOR_MAX_PAGE_CHARS: '200000' },
      'proxy --workers 2',
    );
    const ready = (): number[] =>
      [...proxy.stderr().matchAll(/"event":"worker_ready","pid":(\d+)/g)].map((m) => Number(m[1]));
    try {
      const url = await proxy.url;
      expect(ready()).toHaveLength(2);
      const sessions = [0, 1, 2, 3];
      for (const i of sessions) {
        expect(
          (await send(url, 'POST', '/v1/chat/completions', { model: 'gpt-4o', messages: opening(i) })).status,
        ).toBe(200);
        const recover = [...opening(i), { role: 'assistant', content: 'answer' }, { role: 'user', content: 'recover' }];
        expect((await send(url, 'POST', '/v1/chat/completions', { model: 'gpt-4o', messages: recover })).status).toBe(
          200,
        );
      }
      // Every session's recovery was answered by the gateway (the upstream got its continuation).
      const continuations = upstream.requests.filter((r) => lastOf(r).tool_call_id === 'tt-1');
      expect(continuations).toHaveLength(sessions.length);

      // Scrapes on new connections reach both workers in turn: each answers for the whole gateway.
      for (let scrape = 0; scrape < 4; scrape++) {
        const { status, text } = await send(url, 'GET', '/metrics');
        expect(status).toBe(200);
        expect(value(text, 'token_terminator_proxy_requests_total{api="chat",outcome="reduced"}')).toBe(
          2 * sessions.length,
        );
        expect(value(text, 'token_terminator_proxy_recovery_calls_total{api="chat"}')).toBe(sessions.length);
        expect(value(text, 'token_terminator_proxy_recovery_rounds_total{api="chat",end="continued"}')).toBe(
          sessions.length,
        );
      }
      expect(await stopProcess(proxy.child)).toBe(0);
    } finally {
      if (proxy.child.exitCode === null) proxy.child.kill('SIGKILL');
      for (const pid of ready()) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      await upstream.close();
    }
  }, 180_000);
});
