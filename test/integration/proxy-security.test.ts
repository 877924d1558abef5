/**
 * The proxy's security and robustness promises (issue 18, item 6) and its README section (item 7),
 * each shown over loopback against a recording upstream: a non-loopback bind serves only with the
 * proxy token; Anthropic- and Azure-style keys are never logged, counted, stored or shown; a body
 * over the size limit streams through unreduced even when its length is not declared; malformed
 * bodies of every kind reach the upstream as they are and its answer reaches the client, never a
 * 500 of ours; the README's base-URL settings route the real SDKs through the proxy as written.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { dirname, join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { loadProxyConfig } from '../../src/config/proxy.js';
import { startHarness, testRunOutput, type Harness } from '../proxy/support/harness.js';
import { anthropic, chat, type Recorded, type Reply } from '../proxy/support/upstream.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

interface Raw {
  readonly status: number;
  readonly body: Buffer;
}

/** One HTTP exchange; `chunks` are written one by one (chunked, no content-length) unless `body` is given. */
function send(
  url: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: Buffer | string,
  chunks?: readonly Buffer[],
): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${url}${path}`, { method, headers }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts) }));
    });
    req.on('error', reject);
    if (chunks !== undefined) {
      for (const c of chunks) req.write(c);
      req.end();
    } else req.end(body);
  });
}

const conversation = (output: string) => ({
  model: 'gpt-4o',
  messages: [
    { role: 'user', content: 'Run the tests.' },
    {
      role: 'assistant',
      content: null,
      tool_calls: [
        { id: 'run-1', type: 'function', function: { name: 'terminal', arguments: '{"command":"npm test"}' } },
      ],
    },
    { role: 'tool', tool_call_id: 'run-1', content: output },
  ],
});

describe('a non-loopback bind', () => {
  it('listens only with a proxy token, and answers every route but /healthz only to requests that carry it', async () => {
    expect(() => loadProxyConfig({ env: {}, flags: { host: '0.0.0.0' } })).toThrow(
      /--token|TOKEN_TERMINATOR_PROXY_TOKEN/,
    );
    expect(loadProxyConfig({ env: {}, flags: { host: '::1' } }).token).toBeUndefined();
    const token = 'proxy-token-bind-all-0123456789';
    h = await startHarness(() => chat.text('ok'), { flags: { host: '0.0.0.0', token } });
    expect(h.proxy.server.address()).toMatchObject({ address: '0.0.0.0' });
    const port = new URL(h.url).port;
    const base = `http://127.0.0.1:${port}`;
    const json = { 'content-type': 'application/json', authorization: 'Bearer sk-bind' };
    const body = JSON.stringify({ model: 'unlisted-local-model', messages: [{ role: 'user', content: 'hi' }] });
    const wrong = token.replace(/.$/, (c) => (c === 'x' ? 'y' : 'x'));
    for (const headers of [
      json,
      { ...json, 'x-token-terminator-token': wrong },
      { ...json, 'x-token-terminator-token': `${token}-longer` },
    ]) {
      for (const [method, path] of [
        ['POST', '/v1/chat/completions'],
        ['GET', '/v1/models'],
        ['GET', '/metrics'],
        ['GET', '/dashboard'],
      ] as const) {
        const res = await send(base, method, path, headers, method === 'POST' ? body : undefined);
        expect([path, res.status]).toEqual([path, 401]);
        expect(res.body.toString()).not.toContain(token);
      }
    }
    expect(h.upstream.requests).toHaveLength(0);
    // A load balancer's health check needs no secret and learns nothing.
    expect((await send(base, 'GET', '/healthz', {})).body.toString()).toBe('{"status":"ok"}');
    const ok = await send(base, 'POST', '/v1/chat/completions', { ...json, 'x-token-terminator-token': token }, body);
    expect(ok.status).toBe(200);
    expect(h.upstream.requests).toHaveLength(1);
    expect(h.upstream.requests[0]!.headers['x-token-terminator-token']).toBeUndefined();
    expect(h.upstream.requests[0]!.headers['authorization']).toBe('Bearer sk-bind');
  });
});

describe('credentials', () => {
  it('sends an x-api-key or api-key upstream untouched and never logs, counts, stores or shows it', async () => {
    const keys = {
      anthropic: `sk-ant-canary-${Date.now().toString(36)}`,
      azure: `azure-canary-${Math.random().toString(36).slice(2)}`,
    };
    h = await startHarness((r) => (r.path.startsWith('/v1/messages') ? anthropic.text('ok') : chat.text('ok')));
    // Raw HTTP: the Anthropic SDK sends its key as a bearer token; Claude Code and curl users send x-api-key.
    const messagesBody = {
      model: 'claude-sonnet-4-5',
      max_tokens: 512,
      messages: [
        { role: 'user', content: 'Run the tests.' },
        {
          role: 'assistant',
          content: [{ type: 'tool_use', id: 'tu-1', name: 'terminal', input: { command: 'npm test' } }],
        },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'tu-1', content: testRunOutput(500, 4) }] },
      ],
    };
    await send(
      h.url,
      'POST',
      '/v1/messages',
      { 'content-type': 'application/json', 'x-api-key': keys.anthropic, 'anthropic-version': '2023-06-01' },
      JSON.stringify(messagesBody),
    );
    await send(
      h.url,
      'POST',
      '/v1/chat/completions',
      { 'content-type': 'application/json', 'api-key': keys.azure },
      JSON.stringify(conversation(testRunOutput(500, 5))),
    );
    await send(h.url, 'GET', '/v1/models', { 'api-key': keys.azure });
    await h.proxy.settled();
    const [messages, chatRequest, models] = h.upstream.requests;
    expect(messages!.headers['x-api-key']).toBe(keys.anthropic);
    expect(chatRequest!.headers['api-key']).toBe(keys.azure);
    expect(models!.headers['api-key']).toBe(keys.azure);
    // Both reduced (so their sessions, tenants and renderings are in the store).
    expect(messages!.body.length).toBeLessThan(testRunOutput(500, 4).length / 2);
    expect(chatRequest!.body.length).toBeLessThan(testRunOutput(500, 5).length / 2);
    const seen = [
      JSON.stringify(h.logs),
      await h.proxy.metrics.registry.metrics(),
      (await send(h.url, 'GET', '/dashboard', {})).body.toString(),
    ];
    for (const file of readdirSync(dirname(h.dbPath)))
      seen.push(readFileSync(join(dirname(h.dbPath), file)).toString('latin1'));
    expect(seen.length).toBeGreaterThan(4);
    for (const key of Object.values(keys))
      for (const text of seen) expect(text.includes(key) || text.includes(key.slice(4))).toBe(false);
  });
});

describe('bodies the proxy does not reduce', () => {
  it('streams a body over the size limit through unreduced when its length is declared only by the chunks', async () => {
    h = await startHarness(() => chat.text('ok'), { flags: { maxBodyBytes: 8192 } });
    const body = Buffer.from(JSON.stringify(conversation(testRunOutput(800))));
    const chunks = Array.from({ length: Math.ceil(body.length / 3000) }, (_, i) =>
      body.subarray(i * 3000, (i + 1) * 3000),
    );
    const res = await send(
      h.url,
      'POST',
      '/v1/chat/completions',
      { 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
      undefined,
      chunks,
    );
    expect(res.status).toBe(200);
    expect(h.upstream.requests[0]!.headers['content-length']).toBeUndefined();
    expect(h.upstream.requests[0]!.body.equals(body)).toBe(true);
    expect(await h.proxy.metrics.registry.getSingleMetricAsString('token_terminator_proxy_requests_total')).toContain(
      'outcome="too_large"} 1',
    );
  });

  it('forwards every malformed body as it is and gives the client the upstream\u2019s answer, never a 500 of its own', async () => {
    const upstreamError = (r: Recorded): Reply => ({
      status: 400,
      headers: { 'x-upstream': 'yes' },
      json: { error: { message: `bad body of ${r.body.length} bytes`, type: 'invalid_request_error' } },
    });
    h = await startHarness(upstreamError);
    const bodies = [
      '{"model": "gpt-4o", "messages": [ oops',
      '[1, 2, 3]',
      '"a string"',
      'null',
      '',
      '{"model":"unlisted-local-model","messages":[{"role":"user","content":"\\ud800"}]}',
      '\u0000\u00ff binary',
    ];
    for (const [i, text] of bodies.entries()) {
      for (const path of ['/v1/chat/completions', '/v1/responses', '/v1/messages']) {
        const body = Buffer.from(text, 'utf8');
        const res = await send(h.url, 'POST', path, { 'content-type': 'application/json' }, body);
        expect([i, path, res.status]).toEqual([i, path, 400]);
        expect(JSON.parse(res.body.toString())).toEqual({
          error: { message: `bad body of ${body.length} bytes`, type: 'invalid_request_error' },
        });
        expect(h.upstream.requests.at(-1)!.body.equals(body)).toBe(true);
      }
    }
    // One body of the list is a JSON object (a lone surrogate escape is still JSON): it went through the pipeline, unchanged.
    const counts = await h.proxy.metrics.registry.getSingleMetricAsString('token_terminator_proxy_requests_total');
    for (const api of ['chat', 'responses', 'anthropic']) {
      expect(counts).toContain(`{api="${api}",outcome="malformed"} 6`);
      expect(counts).toContain(`{api="${api}",outcome="unchanged"} 1`);
    }
    expect(counts).not.toContain('fail_open');
  });
});

describe('the gateway\u2019s documentation (docs/gateway.md, linked from the README)', () => {
  const section = readFileSync(new URL('../../docs/gateway.md', import.meta.url), 'utf8');

  it('documents every route, header and default as the code has them', () => {
    const defaults = loadProxyConfig({ env: {} });
    expect(section).toContain(`${defaults.host}:${defaults.port}`);
    expect(section).toContain(`${defaults.maxBodyBytes / 2 ** 20} MiB`);
    expect(section).toContain(`default ${defaults.recoveryRounds}`);
    for (const text of [
      '`POST /v1/chat/completions`',
      '`/v1/responses`',
      '`/v1/messages`',
      '`GET /healthz`',
      '`GET /metrics`',
      '`GET /dashboard`',
      '`x-token-terminator-session`',
      '`x-token-terminator-token`',
      '`--token`',
      '`--max-body-bytes`',
      '`--recovery-rounds`',
      '`TOKEN_TERMINATOR_PROXY_*`',
    ]) {
      expect(section, text).toContain(text);
    }
  });

  it('routes the real OpenAI and Anthropic SDKs through the proxy with the base-URL variables exactly as written', async () => {
    const openaiUrl = /`OPENAI_BASE_URL=(http:\/\/[^`]+)`/.exec(section)?.[1];
    const anthropicUrl = /`ANTHROPIC_BASE_URL=(http:\/\/[^`]+)`/.exec(section)?.[1];
    expect([openaiUrl, anthropicUrl]).toEqual([expect.stringContaining(':8787'), expect.stringContaining(':8787')]);
    // The other clients in the table and Hermes Agent's config point at the same OpenAI base URL.
    expect(section).toContain(`--openai-api-base ${openaiUrl}`);
    expect(section).toContain(`base_url: ${openaiUrl}`);
    h = await startHarness((r) =>
      r.path.startsWith('/v1/messages') ? anthropic.text('via messages') : chat.text('via chat'),
    );
    const port = new URL(h.url).port;
    const saved = { openai: process.env['OPENAI_BASE_URL'], anthropic: process.env['ANTHROPIC_BASE_URL'] };
    process.env['OPENAI_BASE_URL'] = openaiUrl!.replace(':8787', `:${port}`);
    process.env['ANTHROPIC_BASE_URL'] = anthropicUrl!.replace(':8787', `:${port}`);
    try {
      const o = await new OpenAI({ apiKey: 'sk-readme', maxRetries: 0 }).chat.completions.create({
        model: 'gpt-4o',
        messages: [{ role: 'user', content: 'hi' }],
      });
      const a = await new Anthropic({ apiKey: 'sk-ant-readme', maxRetries: 0 }).messages.create({
        model: 'claude-sonnet-4-5',
        max_tokens: 64,
        messages: [{ role: 'user', content: 'hi' }],
      });
      expect(o.choices[0]!.message.content).toBe('via chat');
      expect(a.content[0]).toMatchObject({ type: 'text', text: 'via messages' });
    } finally {
      for (const [name, value] of [
        ['OPENAI_BASE_URL', saved.openai],
        ['ANTHROPIC_BASE_URL', saved.anthropic],
      ] as const) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
    expect(h.upstream.requests.map((r) => r.path)).toEqual(['/v1/chat/completions', '/v1/messages']);
  });
});
