/**
 * The gateway, offline: a loopback upstream plays the model of the repo's recorded session
 * (examples/sessions/sample.jsonl), the proxy sits in front of it, and the real `openai` client
 * sends every request of the session with its baseURL at the proxy, as an agent that cannot be
 * edited would. Prints what the client sent against what reached the upstream. Exits non-zero if
 * the proxy saved nothing or a request went wrong.
 *
 *   npm run example:proxy
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { createProxy, loadProxyConfig } from 'token-terminator/adapters/proxy';
import { referencedArtifacts } from 'token-terminator';

// One recorded session per line: its messages are the conversation the client replays.
const [line] = readFileSync(new URL('./sessions/sample.jsonl', import.meta.url), 'utf8').split('\n');
assert.ok(line !== undefined && line !== '', 'no session in examples/sessions/sample.jsonl');
const session = JSON.parse(line) as { id: string; model?: string; tools?: unknown[]; messages: unknown[] };
const messages = session.messages as unknown as OpenAI.Chat.ChatCompletionMessageParam[];
const turns = messages.flatMap((m, i) => (m.role === 'assistant' && i > 0 ? [i] : []));

// The upstream answers request n with the n-th recorded assistant message and keeps every body it received.
const received: Buffer[] = [];
const upstream = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    received.push(Buffer.concat(chunks));
    const message = messages[turns[received.length - 1] ?? turns.at(-1)!];
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        id: `c${received.length}`,
        object: 'chat.completion',
        created: 0,
        model: session.model ?? 'recorded',
        choices: [{ index: 0, message, finish_reason: 'stop' }],
      }),
    );
  });
});
await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;

const dir = mkdtempSync(join(tmpdir(), 'tt-example-proxy-'));
const proxy = await createProxy({
  config: loadProxyConfig({ env: {}, flags: { port: 0, upstream: upstreamUrl } }),
  terminatorOptions: { env: {}, overrides: { dbPath: join(dir, 'vault.sqlite3') } },
});
try {
  const url = await proxy.listen();
  const client = new OpenAI({ apiKey: 'sk-offline-example', baseURL: `${url}/v1`, maxRetries: 0 });
  let clientBytes = 0;
  for (const i of turns) {
    const body: OpenAI.Chat.ChatCompletionCreateParamsNonStreaming = {
      model: session.model ?? 'gpt-4o',
      messages: messages.slice(0, i),
      ...(session.tools === undefined ? {} : { tools: session.tools as OpenAI.Chat.ChatCompletionTool[] }),
    };
    clientBytes += Buffer.byteLength(JSON.stringify(body));
    const completion: OpenAI.Chat.ChatCompletion = await client.chat.completions.create(body);
    assert.deepEqual(
      completion.choices[0]!.message.content,
      messages[i]!.content ?? null,
      'the client did not get the recorded answer back',
    );
  }
  await proxy.settled();
  const sentBytes = received.reduce((n, b) => n + b.length, 0);
  const withReceipts = received.filter(
    (b) => referencedArtifacts(b.toString('utf8').replace(/\\n/g, '\n')).length > 0,
  ).length;
  const metrics = await proxy.metrics.registry.getMetricsAsJSON();
  const tokens = (direction: string): number =>
    (metrics.find((m) => m.name === 'token_terminator_proxy_request_tokens_total')?.values ?? [])
      .filter((v) => v.labels['direction'] === direction)
      .reduce((n, v) => n + v.value, 0);
  const saved = (metrics.find((m) => m.name === 'token_terminator_proxy_saved_chars_total')?.values ?? []).map(
    (v) => `${String(v.labels['mechanism'])} ${v.value}`,
  );
  assert.equal(received.length, turns.length, 'a request did not reach the upstream');
  assert.ok(sentBytes < clientBytes, 'the proxy saved nothing');
  const pct = (a: number, b: number): string => `${(((a - b) / a) * 100).toFixed(1)}%`;
  console.log(`proxy example: ${turns.length} requests of ${session.id} through ${url} with the real openai client`);
  console.log(`  bytes   client ${clientBytes}  upstream ${sentBytes}  saved ${pct(clientBytes, sentBytes)}`);
  console.log(
    `  tokens  client ${tokens('raw')}  upstream ${tokens('sent')}  saved ${pct(tokens('raw'), tokens('sent'))}`,
  );
  console.log(
    `  ${withReceipts} of ${received.length} upstream requests carried receipts (recoverable with token_terminator); saved chars by mechanism: ${saved.join(', ')}`,
  );
} finally {
  await proxy.close();
  upstream.close();
  rmSync(dir, { recursive: true, force: true });
}
