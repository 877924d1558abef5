/**
 * Session identity and security of the proxy: concurrent conversations stay apart, one
 * conversation stays together, keys are digested (never stored, logged or counted), the proxy
 * token guards a non-loopback bind.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { sessionOf, tenantOf } from '../../adapters/proxy/index.js';
import { loadProxyConfig } from '../../src/config/proxy.js';
import { ConfigError } from '../../src/errors.js';
import { referencedArtifacts } from '../../src/receipts/index.js';
import { startHarness, testRunOutput, type Harness } from '../proxy/support/harness.js';
import { chat, type Recorded, type Reply } from '../proxy/support/upstream.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

type Msg = OpenAI.Chat.ChatCompletionMessageParam;
const opening = (name: string, output: string): Msg[] => [
  { role: 'system', content: 'You are a coding agent.' },
  { role: 'user', content: `Conversation ${name}: run the tests.` },
  {
    role: 'assistant',
    content: null,
    tool_calls: [
      { id: `run-${name}`, type: 'function', function: { name: 'terminal', arguments: '{"command":"npm test"}' } },
    ],
  },
  { role: 'tool', tool_call_id: `run-${name}`, content: output },
];

/** The scripted model: recover once per conversation (when it sees a receipt and has not recovered yet), then answer with its name. */
function model(r: Recorded): Reply {
  const messages = (r.json?.['messages'] ?? []) as { role: string; content?: unknown; tool_call_id?: string }[];
  const name = /Conversation (\w+)/.exec(JSON.stringify(messages[1]?.content))?.[1] ?? '?';
  const recovered = messages.some((m) => m.role === 'tool' && String(m.tool_call_id).startsWith('tt-'));
  const ids = referencedArtifacts(r.body.toString('utf8').replace(/\\n/g, '\n'));
  if (!recovered && ids.length > 0)
    return chat.calls([
      {
        id: `tt-${name}`,
        name: 'token_terminator',
        args: { action: 'artifact_get', artifact_id: ids[0]!, limit: 200_000 },
      },
    ]);
  return chat.text(`answer for ${name}`);
}

describe('sessions', () => {
  it('keeps two interleaved conversations apart and one conversation together', async () => {
    h = await startHarness(model);
    const client = new OpenAI({ apiKey: 'sk-shared', baseURL: `${h.url}/v1`, maxRetries: 0 });
    const outputs = { A: testRunOutput(500, 1), B: testRunOutput(500, 2) };
    const histories = { A: opening('A', outputs.A), B: opening('B', outputs.B) };
    for (let turn = 0; turn < 3; turn++) {
      await Promise.all(
        (['A', 'B'] as const).map(async (name) => {
          const done = await client.chat.completions.create({ model: 'gpt-4o', messages: histories[name] });
          expect(done.choices[0]!.message.content).toBe(`answer for ${name}`);
          histories[name].push(done.choices[0]!.message as Msg, { role: 'user', content: `turn ${turn} of ${name}` });
        }),
      );
    }
    const byConversation = (name: string) =>
      h!.upstream.requests.filter((r) => JSON.stringify(r.json?.['messages']).includes(`Conversation ${name}`));
    for (const name of ['A', 'B'] as const) {
      const other = name === 'A' ? 'B' : 'A';
      const requests = byConversation(name);
      // 1 recovery round + 3 answers; the model recovered once.
      expect(requests).toHaveLength(4);
      for (const r of requests) {
        expect(JSON.stringify(r.json)).not.toContain(`Conversation ${other}`);
        expect(JSON.stringify(r.json)).not.toContain(`tt-${other}`);
      }
      type Wire = { role: string; tool_call_id?: string; tool_calls?: { id: string }[]; content?: string };
      // The continuation carries the exchange right after the tool output it followed, with the exact content.
      const continuation = requests[1]!.json!['messages'] as Wire[];
      expect(continuation[4]!.tool_calls?.[0]?.id).toBe(`tt-${name}`);
      expect((JSON.parse(continuation[5]!.content ?? '{}') as { content?: string }).content).toBe(outputs[name]);
      // Later requests show the recovered output once, as the client sent it, without the exchange.
      for (const r of requests.slice(2)) {
        const messages = r.json!['messages'] as Wire[];
        expect(messages[3]!.content).toBe(outputs[name]);
        expect(messages.some((m) => m.tool_call_id === `tt-${name}`)).toBe(false);
      }
    }
    const sessions = new Set(
      h.upstream.requests.map((r) =>
        sessionOf(
          { authorization: 'Bearer sk-shared' },
          r.json!,
          'chat',
          tenantOf({ authorization: 'Bearer sk-shared' }),
        ),
      ),
    );
    expect(sessions.size).toBe(2);
  });

  it('derives one session per conversation from the instruction prefix and the key digest, or takes the header', () => {
    const first = {
      model: 'm',
      messages: [
        { role: 'system', content: 's' },
        { role: 'user', content: 'u' },
      ],
    };
    const later = {
      model: 'm',
      messages: [...first.messages, { role: 'assistant', content: 'a' }, { role: 'user', content: 'next' }],
    };
    const keyA = { authorization: 'Bearer sk-a' };
    const keyB = { 'x-api-key': 'sk-b' };
    expect(sessionOf(keyA, later, 'chat', tenantOf(keyA))).toBe(sessionOf(keyA, first, 'chat', tenantOf(keyA)));
    expect(sessionOf(keyB, first, 'chat', tenantOf(keyB))).not.toBe(sessionOf(keyA, first, 'chat', tenantOf(keyA)));
    const other = { ...first, messages: [first.messages[0]!, { role: 'user', content: 'another task' }] };
    expect(sessionOf(keyA, other, 'chat', tenantOf(keyA))).not.toBe(sessionOf(keyA, first, 'chat', tenantOf(keyA)));
    const tagged = { ...keyA, 'x-token-terminator-session': 'run-42' };
    expect(sessionOf(tagged, other, 'chat', tenantOf(keyA))).toBe(sessionOf(tagged, first, 'chat', tenantOf(keyA)));
    expect(tenantOf(keyA)).toMatch(/^k_[0-9a-f]{64}$/);
    expect(tenantOf(keyA)).not.toContain('sk-a');
    expect(tenantOf({})).toBe('');
    // A blank header is no credential: an empty Authorization beside an x-api-key is that key's
    // tenant, never the keyless one; the keyless tenant is every client without a credential.
    expect(tenantOf({ authorization: '', 'x-api-key': 'sk-b' })).toBe(tenantOf(keyB));
    expect(tenantOf({ authorization: 'Bearer ', 'x-api-key': 'sk-b' })).toBe(tenantOf(keyB));
    expect(tenantOf({ authorization: '  ' })).toBe('');
    // Every credential counts, by header: the same value under another header, or beside another, is another tenant.
    expect(tenantOf({ 'x-api-key': 'sk-a' })).not.toBe(tenantOf(keyA));
    expect(tenantOf({ ...keyA, 'x-api-key': 'sk-b' })).not.toBe(tenantOf(keyA));
    // A given session name is the name: the tenant is kept beside it, not folded into the string a client could write.
    expect(sessionOf(tagged, first, 'chat', tenantOf(keyA))).toBe('h:run-42');
  });
});

describe('security', () => {
  it('never puts the client key in a log record, a metric or the vault, and sends it upstream untouched', async () => {
    const canary = `sk-canary-${Math.random().toString(36).slice(2)}${Date.now().toString(36)}`;
    h = await startHarness(model);
    const client = new OpenAI({
      apiKey: canary,
      baseURL: `${h.url}/v1`,
      maxRetries: 0,
      defaultHeaders: { 'x-token-terminator-session': 'canary-run' },
    });
    const history = opening('C', testRunOutput(500, 3));
    const done = await client.chat.completions.create({ model: 'gpt-4o', messages: history });
    history.push(done.choices[0]!.message as Msg, { role: 'user', content: 'again' });
    await client.chat.completions.create({ model: 'gpt-4o', messages: history, stream: true }).then(async (s) => {
      for await (const _ of s) void _;
    });
    await client.models.list().catch(() => undefined);
    await h.proxy.settled();

    for (const r of h.upstream.requests) {
      expect(r.headers['authorization']).toBe(`Bearer ${canary}`);
      expect(r.headers['x-token-terminator-session']).toBeUndefined();
    }
    expect(h.logs.length).toBeGreaterThan(0);
    expect(JSON.stringify(h.logs)).not.toContain(canary);
    const metrics = await h.proxy.metrics.registry.metrics();
    expect(metrics).not.toContain(canary);
    expect(metrics).not.toContain('canary-run');
    // Every byte the store holds on disk (database, WAL, and any side file next to it).
    const dir = dirname(h.dbPath);
    const files = readdirSync(dir);
    expect(files.length).toBeGreaterThan(0);
    for (const file of files) {
      const bytes = readFileSync(join(dir, file));
      expect(bytes.includes(Buffer.from(canary)), file).toBe(false);
      expect(bytes.includes(Buffer.from(canary.slice(3))), file).toBe(false);
    }
  });

  it('requires a proxy token for a non-loopback bind and checks it on every request', async () => {
    expect(() => loadProxyConfig({ env: { TOKEN_TERMINATOR_PROXY_HOST: '0.0.0.0' } })).toThrow(ConfigError);
    expect(() => loadProxyConfig({ env: { TOKEN_TERMINATOR_PROXY_HOST: '0.0.0.0' } })).toThrow(
      /TOKEN_TERMINATOR_PROXY_TOKEN/,
    );
    expect(() => loadProxyConfig({ env: {}, flags: { port: '99999' } })).toThrow(
      /--port must be an integer in 0…65535, got "99999"/,
    );
    expect(() => loadProxyConfig({ env: { TOKEN_TERMINATOR_PROXY_UPSTREAM: 'ftp://x' } })).toThrow(
      /TOKEN_TERMINATOR_PROXY_UPSTREAM must be an http\(s\) URL/,
    );
    expect(() => loadProxyConfig({ env: { TOKEN_TERMINATOR_PROXY_TOKEN: 'short' } })).toThrow(/got \(hidden\)/);
    const token = 'proxy-token-0123456789abcdef';
    h = await startHarness(() => chat.text('ok'), { flags: { token } });
    const denied = new OpenAI({ apiKey: 'sk-x', baseURL: `${h.url}/v1`, maxRetries: 0 });
    await expect(
      denied.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
    ).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
    const allowed = new OpenAI({
      apiKey: 'sk-x',
      baseURL: `${h.url}/v1`,
      maxRetries: 0,
      defaultHeaders: { 'x-token-terminator-token': token },
    });
    const ok = await allowed.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    expect(ok.choices[0]!.message.content).toBe('ok');
    expect(h.upstream.requests).toHaveLength(1);
    expect(h.upstream.requests[0]!.headers['x-token-terminator-token']).toBeUndefined();
  });
});
