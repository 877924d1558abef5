/**
 * The proxy as an HTTP citizen: what it relays untouched, how upstream failures reach the client,
 * fail-open paths, the store-backed renderings across a restart, metrics and local routes.
 */
import { request as httpRequest } from 'node:http';
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { referencedArtifacts } from '../../src/receipts/index.js';
import type { Vault } from '../../src/vault/types.js';
import { startHarness, testRunOutput, type Harness } from '../proxy/support/harness.js';
import { chat, startUpstream, type Recorded, type Reply, type Upstream } from '../proxy/support/upstream.js';

const BIG = testRunOutput(800);
let h: Harness | undefined;
let direct: Upstream | undefined;
afterEach(async () => {
  await h?.close();
  await direct?.close();
  h = undefined;
  direct = undefined;
});

interface RawResponse {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: Buffer;
}

/** One plain HTTP exchange (no client library in between). */
function raw(
  url: string,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: Buffer | string,
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${url}${path}`, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

const END_TO_END = (headers: RawResponse['headers']): Record<string, unknown> => {
  const { connection: _c, 'keep-alive': _k, 'transfer-encoding': _t, date: _d, ...rest } = headers;
  return rest;
};

const conversation = (output: string, opening = 'Run the tests.') => ({
  model: 'gpt-4o',
  messages: [
    { role: 'system', content: 'You are a coding agent.' },
    { role: 'user', content: opening },
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

describe('relay', () => {
  it('relays every path it does not handle byte for byte: status, headers, body', async () => {
    const binary = Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 31) % 256));
    const script = (r: Recorded): Reply =>
      r.path.startsWith('/v1/models')
        ? {
            status: 203,
            headers: {
              'x-request-id': 'req-7',
              'set-cookie': ['a=1', 'b=2'],
              'content-type': 'application/json; charset=utf-8',
            },
            raw: '{"data":[{"id":"gpt-4o"}] }',
          }
        : {
            status: 418,
            headers: { 'content-type': 'application/octet-stream', 'x-echo-length': String(r.body.length) },
            raw: Buffer.concat([r.body, binary]),
          };
    h = await startHarness(script);
    direct = await startUpstream(script);
    for (const [method, path, body] of [
      ['GET', '/v1/models?limit=2&after=x', undefined],
      ['POST', '/v1/embeddings', binary],
      ['DELETE', '/v1/files/file-abc', undefined],
    ] as const) {
      const headers = {
        authorization: 'Bearer sk-relay',
        'x-custom': 'kept',
        ...(body === undefined ? {} : { 'content-type': 'application/octet-stream' }),
      };
      const viaProxy = await raw(h.url, method, path, headers, body);
      const viaDirect = await raw(direct.url, method, path, headers, body);
      expect(viaProxy.status).toBe(viaDirect.status);
      expect(END_TO_END(viaProxy.headers)).toEqual(END_TO_END(viaDirect.headers));
      expect(viaProxy.body.equals(viaDirect.body)).toBe(true);
      const seen = h.upstream.requests.at(-1)!;
      expect(seen.method).toBe(method);
      expect(seen.path).toBe(path);
      expect(seen.headers['authorization']).toBe('Bearer sk-relay');
      expect(seen.headers['x-custom']).toBe('kept');
      if (body !== undefined) expect(seen.body.equals(body)).toBe(true);
    }
  });

  it('forwards a request the pipeline leaves unchanged as the client bytes, and a malformed body as it is', async () => {
    h = await startHarness(() => chat.text('ok'));
    // A model the limits table does not know: no output cap is added, so the pipeline changes nothing.
    const small = Buffer.from(
      JSON.stringify({ model: 'unlisted-local-model', messages: [{ role: 'user', content: 'hi' }] }, null, 2),
    );
    await raw(h.url, 'POST', '/v1/chat/completions', { 'content-type': 'application/json' }, small);
    const broken = Buffer.from('{"model": "gpt-4o", "messages": [ oops');
    await raw(h.url, 'POST', '/v1/chat/completions', { 'content-type': 'application/json' }, broken);
    expect(h.upstream.requests[0]!.body.equals(small)).toBe(true);
    expect(h.upstream.requests[1]!.body.equals(broken)).toBe(true);
  });

  it('passes a body over the size limit through unreduced', async () => {
    h = await startHarness(() => chat.text('ok'), { flags: { maxBodyBytes: 8192 } });
    const body = Buffer.from(JSON.stringify(conversation(BIG)));
    const res = await raw(h.url, 'POST', '/v1/chat/completions', { 'content-type': 'application/json' }, body);
    expect(res.status).toBe(200);
    expect(h.upstream.requests[0]!.body.equals(body)).toBe(true);
    expect(await h.proxy.metrics.registry.getSingleMetricAsString('token_terminator_proxy_requests_total')).toContain(
      'outcome="too_large"} 1',
    );
  });
});

describe('reduction', () => {
  it('sends a smaller request carrying a receipt, and a restarted proxy on the same store renders it byte-identically', async () => {
    h = await startHarness(() => chat.text('ok'));
    const body = JSON.stringify(conversation(BIG));
    await raw(h.url, 'POST', '/v1/chat/completions', { authorization: 'Bearer sk-a' }, body);
    const first = h.upstream.requests[0]!;
    expect(first.body.length).toBeLessThan(body.length / 4);
    expect(referencedArtifacts(first.body.toString('utf8')).length).toBeGreaterThan(0);
    // A second proxy (a restart, or another replica) on the same vault file.
    const { createProxy } = await import('../../adapters/proxy/index.js');
    const { loadProxyConfig } = await import('../../src/config/proxy.js');
    const second = await createProxy({
      config: loadProxyConfig({ env: {}, flags: { port: 0, upstream: h.upstream.url } }),
      terminatorOptions: { env: {}, overrides: { dbPath: h.dbPath } },
    });
    try {
      const url = await second.listen();
      await raw(url, 'POST', '/v1/chat/completions', { authorization: 'Bearer sk-a' }, body);
    } finally {
      await second.close();
    }
    expect(h.upstream.requests[1]!.body.equals(first.body)).toBe(true);
  });

  it('forwards the original request when the vault fails', async () => {
    h = await startHarness(() => chat.text('ok'));
    const vault = h.proxy.terminator.vault as Vault & { getRendering: Vault['getRendering'] };
    const original = vault.getRendering.bind(vault);
    vault.getRendering = () => Promise.reject(Object.assign(new Error('disk I/O error'), { code: 'SQLITE_IOERR' }));
    try {
      const body = Buffer.from(JSON.stringify(conversation(BIG)));
      const res = await raw(h.url, 'POST', '/v1/chat/completions', { 'content-type': 'application/json' }, body);
      expect(res.status).toBe(200);
      expect(h.upstream.requests[0]!.body.equals(body)).toBe(true);
      expect(
        await h.proxy.metrics.registry.getSingleMetricAsString('token_terminator_proxy_fail_open_total'),
      ).toContain('reason="prepare"} 1');
    } finally {
      vault.getRendering = original;
    }
  });
});

describe('a full vault', () => {
  it('passes each output as sent, counts the refusals by stage and error, and logs the first one only', async () => {
    // A vault smaller than one output refuses each with E_VAULT_CAPACITY, as a vault full of pinned evidence does.
    h = await startHarness(() => chat.text('ok'), { overrides: { vaultMaxBytes: 4096 } });
    const outputs = [testRunOutput(800, 1), testRunOutput(800, 2)];
    for (const [i, output] of outputs.entries()) {
      const body = Buffer.from(JSON.stringify(conversation(output, `Run the tests, round ${i}.`)));
      const res = await raw(h.url, 'POST', '/v1/chat/completions', { 'x-token-terminator-session': 's' }, body);
      expect(res.status).toBe(200);
      expect(h.upstream.requests[i]!.body.toString('utf8')).toContain(JSON.stringify(output).slice(1, -1));
    }
    const counted = await h.proxy.metrics.registry.getSingleMetricAsString(
      'token_terminator_proxy_stage_fail_open_total',
    );
    const refusals = [...counted.matchAll(/error="VaultCapacityError:E_VAULT_CAPACITY"[^}]*\} (\d+)/g)];
    expect(refusals.reduce((n, m) => n + Number(m[1]), 0)).toBeGreaterThanOrEqual(outputs.length);
    const full = h.logs.filter((r) => r.event === 'vault_full');
    expect(full).toHaveLength(1);
    expect(full[0]!.hint).toContain('TOKEN_TERMINATOR_VAULT_MAX_BYTES');
  });
});

describe('upstream failures reach the client as the upstream sent them', () => {
  const clients = (url: string) =>
    new OpenAI({ apiKey: 'sk-test', baseURL: `${url}/v1`, maxRetries: 0, timeout: 2000 });

  it('4xx and 5xx answers: same status, same body', async () => {
    const script = (_r: Recorded, i: number): Reply =>
      i % 2 === 0
        ? {
            status: 400,
            headers: { 'x-request-id': 'bad-1' },
            json: { error: { message: 'max_tokens is too large', type: 'invalid_request_error' } },
          }
        : { status: 503, json: { error: { message: 'overloaded', type: 'server_error' } } };
    h = await startHarness(script);
    direct = await startUpstream(script);
    for (const body of [conversation(BIG), { model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }]) {
      for (let k = 0; k < 2; k++) {
        const viaProxy = await raw(
          h.url,
          'POST',
          '/v1/chat/completions',
          { 'content-type': 'application/json' },
          JSON.stringify(body),
        );
        const viaDirect = await raw(
          direct.url,
          'POST',
          '/v1/chat/completions',
          { 'content-type': 'application/json' },
          JSON.stringify(body),
        );
        expect(viaProxy.status).toBe(viaDirect.status);
        expect(viaProxy.body.equals(viaDirect.body)).toBe(true);
        expect(viaProxy.headers['x-request-id']).toBe(viaDirect.headers['x-request-id']);
      }
    }
    const err = await clients(h.url)
      .chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'x' }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.BadRequestError>).message).toContain('max_tokens is too large');
  });

  it('an upstream that never answers: the client times out as it would directly, and the proxy lets go of the upstream', async () => {
    h = await startHarness(() => 'hang');
    const err = await new OpenAI({
      apiKey: 'sk-test',
      baseURL: `${h.url}/v1`,
      maxRetries: 0,
      timeout: 300,
    }).chat.completions
      .create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'x' }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIConnectionTimeoutError);
    await h.upstream.dropped;
  });

  it('a connection reset, before the answer or in the middle of a stream, reaches the client as a connection error', async () => {
    for (const failure of ['reset', 'reset-mid'] as const) {
      /** What the client's call to `url` ends in: the error it throws, or 'no error'. */
      const outcome = (url: string): Promise<unknown> =>
        clients(url)
          .chat.completions.create({
            model: 'gpt-4o',
            messages: [{ role: 'user', content: 'x' }],
            stream: failure === 'reset-mid',
          })
          .then(async (s) => {
            if (failure === 'reset-mid') for await (const _ of s as AsyncIterable<unknown>) void _;
            return 'no error';
          })
          .catch((e: unknown) => e);
      const viaProxy = await startHarness(() => failure);
      direct = await startUpstream(() => failure);
      try {
        const through = await outcome(viaProxy.url);
        const straight = await outcome(direct.url);
        expect(through).not.toBe('no error');
        expect((through as Error).constructor).toBe((straight as Error).constructor);
      } finally {
        await viaProxy.close();
        await direct.close();
        direct = undefined;
      }
    }
  });

  it('an unreachable upstream is a 502 naming the upstream and why, and the log says the same', async () => {
    const gone = await startUpstream(() => chat.text('never'));
    const origin = new URL(gone.url);
    await gone.close();
    h = await startHarness(() => chat.text('unused'), { flags: { upstream: `http://${origin.host}` } });
    for (const path of ['/v1/chat/completions', '/v1/models']) {
      const res = await raw(
        h.url,
        path === '/v1/models' ? 'GET' : 'POST',
        path,
        { 'content-type': 'application/json' },
        path === '/v1/models' ? '' : JSON.stringify({ model: 'm', messages: [] }),
      );
      expect(res.status, path).toBe(502);
      const error = (JSON.parse(res.body.toString('utf8')) as { error: { code: string; message: string } }).error;
      expect(error.code).toBe('ECONNREFUSED');
      expect(error.message).toContain(`upstream http://${origin.host} unreachable (connection refused`);
    }
    const failures = h.logs.filter((r) => r.event === 'upstream_failed');
    expect(failures).toHaveLength(2);
    for (const r of failures)
      expect(r).toMatchObject({ level: 'warn', upstream: `http://${origin.host}`, code: 'ECONNREFUSED', status: 502 });
  });
});

describe('local routes', () => {
  it('answers /healthz and /metrics itself, and takes extra routes through the hook', async () => {
    h = await startHarness((r, i) =>
      i === 0
        ? chat.calls([
            {
              id: 'tt-1',
              name: 'token_terminator',
              args: {
                action: 'artifact_get',
                artifact_id: referencedArtifacts(r.body.toString('utf8'))[0] ?? 'x',
                limit: 200_000,
              },
            },
          ])
        : chat.text('done'),
    );
    h.proxy.route('/dashboard', (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<h1>dashboard</h1>');
    });
    expect((await raw(h.url, 'GET', '/healthz')).body.toString()).toBe('{"status":"ok"}');
    expect((await raw(h.url, 'GET', '/dashboard')).body.toString()).toBe('<h1>dashboard</h1>');
    await raw(
      h.url,
      'POST',
      '/v1/chat/completions',
      { authorization: 'Bearer sk-m' },
      JSON.stringify(conversation(BIG)),
    );
    await h.proxy.settled();
    const metrics = (await raw(h.url, 'GET', '/metrics')).body.toString();
    const value = (line: string): number =>
      Number(new RegExp(`^${line.replace(/[{}"]/g, (c) => `\\${c}`)} (\\d+)`, 'm').exec(metrics)?.[1] ?? Number.NaN);
    expect(value('token_terminator_proxy_requests_total{api="chat",outcome="reduced"}')).toBe(1);
    expect(value('token_terminator_proxy_recovery_calls_total{api="chat"}')).toBe(1);
    expect(value('token_terminator_proxy_recovery_rounds_total{api="chat",end="continued"}')).toBe(1);
    const rawBytes = value('token_terminator_proxy_request_bytes_total{api="chat",direction="raw"}');
    const sent = value('token_terminator_proxy_request_bytes_total{api="chat",direction="sent"}');
    expect(sent).toBeLessThan(rawBytes);
    expect(value('token_terminator_proxy_request_bytes_total{api="chat",direction="recovery"}')).toBeGreaterThan(
      BIG.length,
    );
    expect(value('token_terminator_proxy_upstream_seconds_count{api="chat"}')).toBe(2);
    expect(metrics).toMatch(/token_terminator_proxy_saved_chars_total\{mechanism="compressToolResult"\} \d+/);
    expect(h.upstream.requests).toHaveLength(2);
    // /healthz, /dashboard and /metrics were answered here: logged as local, never as relayed.
    await raw(h.url, 'GET', '/healthz');
    const logged = h.logs.filter((l) => l.event === 'request').map((l) => (l as { api?: string }).api);
    expect(logged.filter((a) => a === 'relay')).toEqual([]);
    expect(logged.filter((a) => a === 'local')).toHaveLength(4);
  });
});
