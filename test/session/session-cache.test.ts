import fc from 'fast-check';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { referencedArtifacts } from '../../src/receipts/index.js';
import { SessionCache } from '../../src/session/session-cache.js';
import { SESSION_BYTES_PER_CHAR } from '../../src/ledger/request-chars.js';
import { createTerminator } from '../../src/runtime/index.js';
import type { Terminator } from '../../src/runtime/types.js';
import { sessionStateKey, type ProviderRequest } from '../../src/step.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'tt-sessions-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('SessionCache: the bound on per-session state', () => {
  it('never accounts more bytes than its bound, but for the session just sized when it alone is larger (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 5000 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 30 }), fc.integer({ min: 0, max: 8000 })), { maxLength: 80 }),
        (maxBytes, calls) => {
          const sessions = new SessionCache(256, maxBytes);
          for (const [session, bytes] of calls) {
            sessions.account(sessions.of({ sessionId: `s${session}` }), bytes);
            expect(sessions.bytes <= maxBytes || sessions.bytes === bytes).toBe(true);
          }
        },
      ),
    );
  });

  it('drops the least recently used sessions first, and a dropped session starts afresh', () => {
    const sessions = new SessionCache(256, 100);
    const a = sessions.of({ sessionId: 'a' });
    a.seenItems = 7;
    sessions.account(a, 60);
    sessions.account(sessions.of({ sessionId: 'b' }), 30);
    expect(sessions.of({ sessionId: 'a' })).toBe(a); // a is the most recent now
    sessions.account(sessions.of({ sessionId: 'c' }), 30); // 60 + 30 + 30 > 100: b (least recent) goes
    expect(sessions.bytes).toBe(90);
    expect(sessions.size).toBe(2);
    expect(sessions.has({ sessionId: 'b' })).toBe(false);
    expect(sessions.of({ sessionId: 'a' }).seenItems).toBe(7);
    expect(sessions.of({ sessionId: 'b' }).seenItems).toBe(0); // a new session
  });

  it('keeps at most its count of sessions, and ending one frees it and its bytes', () => {
    const sessions = new SessionCache(2);
    sessions.account(sessions.of({ sessionId: 'a' }), 10);
    sessions.of({ sessionId: 'b' });
    sessions.of({ sessionId: 'c' });
    expect([sessions.has({ sessionId: 'a' }), sessions.size, sessions.bytes]).toEqual([false, 2, 0]);
    sessions.end({ sessionId: 'b' });
    expect([sessions.has({ sessionId: 'b' }), sessions.size]).toEqual([false, 1]);
  });

  it("keeps two tenants' sessions of one id apart", () => {
    const sessions = new SessionCache(4);
    const a = sessions.of({ sessionId: 's', tenant: 'ta' });
    expect(sessions.of({ sessionId: 's', tenant: 'tb' })).not.toBe(a);
    sessions.end({ sessionId: 's', tenant: 'tb' });
    expect(sessions.peek({ sessionId: 's', tenant: 'ta' })).toBe(a);
  });
});

describe('createTerminator maxSessionBytes', () => {
  const big = Array.from({ length: 2000 }, (_, i) => `diagnostic line ${i}: state`).join('\n');
  const opening = (s: string) => [
    { role: 'user', content: `inspect ${s}` },
    {
      role: 'assistant',
      content: '',
      tool_calls: [{ id: 'c1', type: 'function', function: { name: 'terminal', arguments: '{}' } }],
    },
    { role: 'tool', tool_call_id: 'c1', content: `${s}\n${big}` },
  ];
  const later = (s: string) => [...opening(s), { role: 'assistant', content: 'ok' }, { role: 'user', content: 'next' }];

  /** Session `a`'s two requests, with `others` sessions' first requests between them. */
  async function run(tt: Terminator, others: number): Promise<[string, string]> {
    const first = await tt.reduceRequest({ model: 'gpt-4o', messages: opening('a') }, { sessionId: 'a' });
    for (let i = 0; i < others; i++)
      await tt.reduceRequest({ model: 'gpt-4o', messages: opening(`o${i}`) }, { sessionId: `o${i}` });
    const second = await tt.reduceRequest({ model: 'gpt-4o', messages: later('a') }, { sessionId: 'a' });
    return [JSON.stringify(first.value['messages']), JSON.stringify(second.value['messages'])];
  }

  it("an evicted session's next request is reduced as if it had stayed, and its receipt recovers exactly", async () => {
    await using kept = await createTerminator({
      env: {},
      overrides: { dbPath: join(dir, 'kept.sqlite3'), historyPolicy: 'lazy' },
    });
    // One byte: each other session's request drops every session but its own, `a`'s included.
    await using bounded = await createTerminator({
      env: {},
      overrides: { dbPath: join(dir, 'bounded.sqlite3'), historyPolicy: 'lazy' },
      maxSessionBytes: 1,
    });
    const expected = await run(kept, 5);
    const got = await run(bounded, 5);
    expect(got).toEqual(expected);
    expect(got[1]).not.toContain('diagnostic line 1999');
    const messages = JSON.parse(got[1]) as { role: string; content: string }[];
    const [id] = referencedArtifacts(messages.find((m) => m.role === 'tool')!.content);
    let content = '';
    let offset: number | null = 0;
    while (offset !== null) {
      const page = JSON.parse(
        await bounded.recoveryTool.handle(
          { action: 'artifact_get', artifact_id: id!, offset, limit: 20000 },
          { sessionId: 'a' },
        ),
      ) as { content: string; next_offset: number | null };
      content += page.content;
      offset = page.next_offset;
    }
    expect(content).toBe(`a\n${big}`);
  });

  it('rejects a bound that is not a positive integer, naming the option', async () => {
    await expect(createTerminator({ env: {}, overrides: { dbPath: ':memory:' }, maxSessionBytes: 0 })).rejects.toThrow(
      'createTerminator: options.maxSessionBytes must be an integer ≥ 1 (got 0)',
    );
  });

  it(`estimates a session at ${SESSION_BYTES_PER_CHAR} bytes per character of its latest request, and binds on that`, async () => {
    let run = 0;
    const held = async (maxSessionBytes: number, sessions: readonly string[]) => {
      await using tt = await createTerminator({
        env: {},
        overrides: { dbPath: join(dir, `held-${run++}.sqlite3`), historyPolicy: 'lazy' },
        maxSessionBytes,
      });
      for (const s of sessions) await tt.reduceRequest({ model: 'gpt-4o', messages: opening(s) }, { sessionId: s });
      return tt.heldState();
    };
    const one = await held(2 ** 40, ['a']);
    const json = JSON.stringify(opening('a')).length;
    expect(one.sessions).toBe(1);
    expect(one.bytes % SESSION_BYTES_PER_CHAR).toBe(0);
    // The characters are those of the items' spaced canonical JSON: a little more than compact JSON.
    expect(one.bytes / SESSION_BYTES_PER_CHAR).toBeGreaterThanOrEqual(json * 0.95);
    expect(one.bytes / SESSION_BYTES_PER_CHAR).toBeLessThan(json * 1.2);
    // Room for one session of that size and not two: the second drops the first; room for three keeps both.
    expect(await held(Math.floor(one.bytes * 1.5), ['a', 'b'])).toMatchObject({ sessions: 1 });
    expect(await held(one.bytes * 3, ['a', 'b'])).toMatchObject({ sessions: 2 });
    expect(await held(one.bytes * 3, [])).toEqual({ sessions: 0, bytes: 0 });
  });
});

describe('endSession', () => {
  it('frees every entry the Terminator kept for the session, and no other session', async () => {
    await using tt = await createTerminator({ env: {}, overrides: { dbPath: join(dir, 'end.sqlite3') } });
    const lines = Array.from({ length: 3000 }, (_, i) => `FAILED tests/test_${i}.py::test_case - assert ${i} == 0`);
    const output = lines.join('\n');
    const session = (sessionId: string) => ({ sessionId, tenant: 'k_tenant' });
    const shown = new Map<string, ProviderRequest>();
    for (const id of ['a', 'b']) {
      const ctx = session(id);
      const call = { id: 'c1', name: 'terminal', args: { command: 'pytest' } };
      const result = await tt.reduceToolResult(
        { callId: 'c1', name: 'terminal', args: call.args, content: output },
        ctx,
      );
      await tt.reduceToolCall(call, ctx);
      const messages = [
        { role: 'user', content: `fix the tests of ${id}` },
        {
          role: 'assistant',
          content: '',
          tool_calls: [
            { id: 'c1', type: 'function', function: { name: 'terminal', arguments: '{"command":"pytest"}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'c1', content: result.value.content },
        { role: 'assistant', content: 'looking' },
      ];
      await tt.reduceRequest({ model: 'gpt-4o', messages }, ctx);
      shown.set(id, { model: 'gpt-4o', messages });
      // The next request as a host sends it (the gateway, the client wrappers): through the host path.
      await tt.prepare({
        request: { model: 'gpt-4o', messages: [...messages, { role: 'user', content: 'go on' }] },
        context: { ...ctx, format: 'chat' },
        offer: true,
      });
    }
    await tt.settled();
    // Its Session, the host path's memo in it (items, renderings, the offered tool) and its tool credits.
    expect(tt.heldState(session('a')).entries).toBe(3);
    // The tool credits, read where they are kept: a request showing the rendering is credited.
    const credited = (id: string) =>
      tt.toolCredits!.account(sessionStateKey(session(id)), shown.get(id)!, shown.get(id)!, tt.counter).saved;
    expect(credited('a')).not.toEqual({});
    await tt.endSession(session('a'));
    expect(tt.heldState(session('a')).entries).toBe(0);
    expect(credited('a')).toEqual({});
    expect(tt.heldState(session('b')).entries).toBe(3);
    expect(credited('b')).not.toEqual({});
    expect(tt.heldState()).toMatchObject({ sessions: 1 });
  });
});
