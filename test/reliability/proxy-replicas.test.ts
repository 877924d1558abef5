/**
 * Two proxy replicas on one PostgreSQL store (issue 16): two `token-terminator proxy` processes,
 * each its own runtime, pool and in-process caches, behind no sticky routing. One conversation's
 * requests alternate between them. Whatever one replica decided (a tool output's rendering, the
 * recovery tool's place, a recovered exchange) the other shows byte for byte, and a receipt one
 * replica issued is recovered exactly by the other. The session is derived by both from the
 * conversation itself (no session header), so the replicas also agree on who it belongs to.
 */
import { type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { referencedArtifacts } from '../../src/receipts/index.js';
import { freshSchema } from '../support/postgres.js';
import { testRunOutput } from '../proxy/support/harness.js';
import { chat, startUpstream, type Recorded, type Reply } from '../proxy/support/upstream.js';
import { spawnProxy, stopProcess } from '../support/proxy-process.js';

const dir = mkdtempSync(join(tmpdir(), 'tt-proxy-replicas-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** One replica: the real CLI in its own process. */
async function startReplica(
  upstream: string,
  dbUrl: string,
  name: string,
): Promise<{ url: string; child: ChildProcess; stderr: () => string }> {
  const replica = spawnProxy(
    ['--upstream', upstream, '--db-url', dbUrl, '--quiet'],
    { PATH: process.env['PATH'] ?? '', HOME: join(dir, name), TOKEN_TERMINATOR_MAX_PAGE_CHARS: '200000' },
    `replica ${name}`,
  );
  return { url: await replica.url, child: replica.child, stderr: replica.stderr };
}

type Msg = OpenAI.Chat.ChatCompletionMessageParam;
const OUT1 = testRunOutput(600, 1);
const OUT2 = testRunOutput(600, 2);
const tools: OpenAI.Chat.ChatCompletionTool[] = [
  {
    type: 'function',
    function: { name: 'terminal', parameters: { type: 'object', properties: { command: { type: 'string' } } } },
  },
];
const ids = (r: Recorded): string[] => referencedArtifacts(r.body.toString('utf8').replace(/\\n/g, '\n'));
const messagesOf = (r: Recorded): unknown[] => r.json!['messages'] as unknown[];
const toolNames = (r: Recorded): string[] =>
  ((r.json!['tools'] ?? []) as { function: { name: string } }[]).map((t) => t.function.name);
/** The `content` a recovery result carried in a continuation request. */
function recovered(r: Recorded, callId: string): string {
  const m = (messagesOf(r) as { role: string; tool_call_id?: string; content?: string }[]).find(
    (x) => x.role === 'tool' && x.tool_call_id === callId,
  );
  return (JSON.parse(m?.content ?? '{}') as { content?: string }).content ?? '';
}

describe.skipIf(inject('pgUrl') === '')('two proxy replicas on one PostgreSQL store', () => {
  it('serve one conversation alternately: renderings byte-identical, receipts of one recovered by the other', async () => {
    const schema = await freshSchema(inject('pgUrl'), 'replicas');
    // Upstream requests, in order: 0 (A) answer · 1 (B) recover OUT1's receipt, which A issued · 2 (B) answer ·
    // 3 (A) recover OUT2's receipt, which B issued · 4 (A) answer · 5 (B) answer.
    let receipt1 = '';
    let receipt2 = '';
    const script = (r: Recorded, i: number): Reply => {
      if (i === 0) receipt1 = ids(r)[0] ?? 'none';
      if (i === 1) {
        receipt2 = ids(r).find((id) => id !== receipt1) ?? 'none';
        return chat.calls([
          {
            id: 'tt-1',
            name: 'token_terminator',
            args: { action: 'artifact_get', artifact_id: receipt1, limit: 200_000 },
          },
        ]);
      }
      if (i === 3)
        return chat.calls([
          {
            id: 'tt-2',
            name: 'token_terminator',
            args: { action: 'artifact_get', artifact_id: receipt2, limit: 200_000 },
          },
        ]);
      return chat.text(`answer ${i}`);
    };
    const upstream = await startUpstream(script);
    const [a, b] = await Promise.all([
      startReplica(upstream.url, schema.url, 'a'),
      startReplica(upstream.url, schema.url, 'b'),
    ]);
    try {
      const via = (replica: { url: string }) =>
        new OpenAI({ apiKey: 'sk-replicas', baseURL: `${replica.url}/v1`, maxRetries: 0 });
      const history: Msg[] = [
        { role: 'system', content: 'You are a coding agent.' },
        { role: 'user', content: 'Run the tests, then the lint.' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'run-1', type: 'function', function: { name: 'terminal', arguments: '{"command":"npm test"}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'run-1', content: OUT1 },
      ];
      const turn = async (replica: { url: string }): Promise<string> => {
        const done = await via(replica).chat.completions.create({ model: 'gpt-4o', messages: history, tools });
        const message = done.choices[0]!.message;
        expect(message.tool_calls, 'the client never sees a recovery call').toBeUndefined();
        history.push(message as Msg);
        return message.content ?? '';
      };

      expect(await turn(a)).toBe('answer 0');
      history.push(
        { role: 'user', content: 'Now the lint.' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'run-2', type: 'function', function: { name: 'terminal', arguments: '{"command":"npm run lint"}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'run-2', content: OUT2 },
      );
      expect(await turn(b)).toBe('answer 2');
      history.push({ role: 'user', content: 'Summarize both.' });
      expect(await turn(a)).toBe('answer 4');
      history.push({ role: 'user', content: 'Thanks.' });
      expect(await turn(b)).toBe('answer 5');

      const r = upstream.requests;
      expect(r).toHaveLength(6);
      // A issued receipt 1 (its first sight of OUT1), B issued receipt 2; each recovered by the other replica, exactly.
      expect(receipt1).toMatch(/^a_/);
      expect(receipt2).toMatch(/^a_/);
      expect(receipt2).not.toBe(receipt1);
      expect(r[0]!.body.length).toBeLessThan(OUT1.length / 4);
      expect(recovered(r[2]!, 'tt-1')).toBe(OUT1);
      expect(recovered(r[4]!, 'tt-2')).toBe(OUT2);

      // Every request starts with what the one before it sent, byte for byte, whichever replica sent it:
      // B shows A's rendering of OUT1; A shows B's rendering of OUT2 and B's recovered exchange; B shows A's.
      const prefix = (earlier: Recorded, later: Recorded): void => {
        const e = messagesOf(earlier).map((m) => JSON.stringify(m));
        const l = messagesOf(later).map((m) => JSON.stringify(m));
        expect(l.slice(0, e.length)).toEqual(e);
      };
      // A recovered output rejoins the working set: the next request, from either replica, shows it
      // once, as the client sent it, without the recovery exchange (issue 31: shown once).
      const rejoin = (earlier: Recorded, call: string, recovery: string, output: string): string[] =>
        messagesOf(earlier)
          .filter((m) => {
            const x = m as { tool_call_id?: string; tool_calls?: { id: string }[] };
            return x.tool_call_id !== recovery && !(x.tool_calls ?? []).some((c) => c.id === recovery);
          })
          .map((m) =>
            JSON.stringify(
              (m as { tool_call_id?: string }).tool_call_id === call ? { ...(m as object), content: output } : m,
            ),
          );
      const rejoined = (earlier: string[], later: Recorded): void => {
        const l = messagesOf(later).map((m) => JSON.stringify(m));
        expect(l.slice(0, earlier.length)).toEqual(earlier);
      };
      prefix(r[0]!, r[1]!); // A → B
      rejoined(rejoin(r[2]!, 'run-1', 'tt-1', OUT1), r[3]!); // B's continuation, OUT1 rejoined → A
      rejoined(rejoin(r[4]!, 'run-2', 'tt-2', OUT2), r[5]!); // A's continuation, OUT2 rejoined → B
      // The recovery tool stays at one place across replicas, so the cached prefix does too.
      expect(toolNames(r[0]!)).toEqual(['terminal', 'token_terminator']);
      for (const x of r.slice(1)) expect(toolNames(x)).toEqual(toolNames(r[0]!));
      for (const x of r) expect(x.headers['authorization']).toBe('Bearer sk-replicas');

      // Either replica's dashboard shows the store's rows: all four client requests, one session.
      // The accounting of an answered request is written just after the answer: wait for the fourth.
      let page = '';
      for (let i = 0; i < 200 && !page.includes('data-key="requests" data-value="4"'); i++) {
        if (i > 0) await new Promise((resolve) => setTimeout(resolve, 50));
        page = await (await fetch(`${b.url}/dashboard`)).text();
      }
      expect(page).toContain('data-key="requests" data-value="4"');
      expect(page).toContain('data-key="sessions" data-value="1"');
    } finally {
      const codes = await Promise.all([stopProcess(a.child), stopProcess(b.child)]);
      await upstream.close();
      await schema.drop();
      expect(codes).toEqual([0, 0]);
      expect(a.stderr() + b.stderr()).not.toContain('sk-replicas');
    }
  }, 180_000);
});
