/**
 * Fail-open holds for any shape (issue 49): a `tools` or `metadata` value nested 200,000 deep, sent
 * in a conversation whose earlier requests were reduced, is forwarded to the upstream byte for byte
 * (nothing in reading, reducing or serializing it may take the request down), and the client gets
 * the upstream's answer.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startHarness, testRunOutput, type Harness } from '../proxy/support/harness.js';
import { chat } from '../proxy/support/upstream.js';

const DEPTH = 200_000;
let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const messages = (turns: number): unknown[] => {
  const out: unknown[] = [
    { role: 'system', content: 'You are a coding agent.' },
    { role: 'user', content: 'Run the tests.' },
  ];
  for (let t = 0; t < turns; t++)
    out.push(
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          {
            id: `run-${t}`,
            type: 'function',
            function: { name: 'terminal', arguments: `{"command":"npm test ${t}"}` },
          },
        ],
      },
      { role: 'tool', tool_call_id: `run-${t}`, content: testRunOutput(900, t) },
    );
  return out;
};

/** A body whose `key` holds a value nested `DEPTH` deep, as text (no engine builds it as an object first). */
function deepBody(key: 'tools' | 'metadata', turns: number): string {
  const head = JSON.stringify({ model: 'gpt-4o', messages: messages(turns) }).slice(0, -1);
  const deep =
    key === 'tools' ? `${'['.repeat(DEPTH)}${']'.repeat(DEPTH)}` : `${'{"a":'.repeat(DEPTH)}1${'}'.repeat(DEPTH)}`;
  return `${head},"${key}":${deep}}`;
}

describe('proxy: deeply nested values after reduced requests', () => {
  it('forwards a 200,000-deep tools or metadata value unchanged, in every session it meets', async () => {
    h = await startHarness(() => chat.text('ok'));
    const post = async (body: string, session: string): Promise<{ status: number; text: string }> => {
      const res = await fetch(`${h!.url}/v1/chat/completions`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          authorization: 'Bearer sk-deep',
          'x-token-terminator-session': session,
        },
        body,
      });
      return { status: res.status, text: await res.text() };
    };
    for (const key of ['tools', 'metadata'] as const)
      for (const session of [`deep-${key}`, `deep-${key}-again`]) {
        // Earlier requests of the conversation were reduced (their outputs went to the vault).
        for (const turns of [1, 2]) {
          const before = h.upstream.requests.length;
          expect((await post(JSON.stringify({ model: 'gpt-4o', messages: messages(turns) }), session)).status).toBe(
            200,
          );
          expect(h.upstream.requests.at(-1)!.body.length).toBeLessThan(
            JSON.stringify({ model: 'gpt-4o', messages: messages(turns) }).length,
          );
          expect(h.upstream.requests.length).toBe(before + 1);
        }
        for (const turns of [2, 3]) {
          const body = deepBody(key, turns);
          const answer = await post(body, session);
          expect(answer.status).toBe(200);
          expect(answer.text).toContain('ok');
          expect(h.upstream.requests.at(-1)!.body.toString()).toBe(body);
        }
        // The session goes on: its next plain request is reduced as before.
        const next = JSON.stringify({ model: 'gpt-4o', messages: messages(4) });
        expect((await post(next, session)).status).toBe(200);
        expect(h.upstream.requests.at(-1)!.body.length).toBeLessThan(next.length);
      }
    // And where nothing is reduced (a new session, small outputs): forwarded as sent, accounted without failing.
    for (const key of ['tools', 'metadata'] as const) {
      const body = deepBody(key, 0);
      expect((await post(body, `deep-fresh-${key}`)).status).toBe(200);
      expect(h.upstream.requests.at(-1)!.body.toString()).toBe(body);
    }
    await h.proxy.settled();
    expect(h.logs.filter((l) => l.event === 'handler_failed')).toEqual([]);
    expect(h.logs.some((l) => l.event === 'fail_open')).toBe(true);
  }, 120_000);
});
