import fc from 'fast-check';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { stepOperator } from '../../src/operator-kit.js';
import { referencedArtifacts } from '../../src/receipts/index.js';
import { LaneCache } from '../../src/runtime/lanes.js';
import { SESSION_BYTES_PER_CHAR } from '../../src/ledger/request-chars.js';
import { createTerminator } from '../../src/runtime/index.js';
import { advance, createStep } from '../../src/step.js';
import type { Terminator } from '../../src/runtime/types.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'tt-lanes-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

const counting = () =>
  stepOperator<string>('count', () => {
    let seen = 0;
    return (s) => advance(s, `${s.value}#${++seen}`, { stage: 'count', kind: 'applied', reason: 'test' });
  });

describe('LaneCache: the bound on per-session state', () => {
  it('never accounts more bytes than its bound, but for the lane just sized when it alone is larger (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 5000 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 30 }), fc.integer({ min: 0, max: 8000 })), { maxLength: 80 }),
        (maxBytes, calls) => {
          const lanes = new LaneCache(256, maxBytes);
          for (const [session, bytes] of calls) {
            lanes.get('request', `s${session}`, counting);
            lanes.account('request', `s${session}`, bytes);
            expect(lanes.bytes <= maxBytes || lanes.bytes === bytes).toBe(true);
          }
          lanes.closeAll();
        },
      ),
    );
  });

  it('drops the least recently used sessions first, and a dropped session starts a new lane (fresh state)', async () => {
    const lanes = new LaneCache(256, 100);
    const run = (s: string, v: string) =>
      lanes
        .get('request', s, counting)
        .run(createStep(v, { sessionId: s }))
        .then((o) => o.value);
    expect(await run('a', 'x')).toBe('x#1');
    lanes.account('request', 'a', 60);
    expect(await run('b', 'x')).toBe('x#1');
    lanes.account('request', 'b', 30);
    expect(await run('a', 'y')).toBe('y#2'); // a is the most recent now
    lanes.account('request', 'a', 60);
    expect(await run('c', 'x')).toBe('x#1');
    lanes.account('request', 'c', 30); // 60 + 30 + 30 > 100: b (least recent) goes
    expect(lanes.bytes).toBe(90);
    expect(lanes.sessions).toBe(2);
    expect(await run('a', 'z')).toBe('z#3');
    expect(await run('b', 'y')).toBe('y#1'); // a new lane
    lanes.closeAll();
  });
  it("keeps a host's state beside a lane while the lane lives, and drops it with the lane", () => {
    const lanes = new LaneCache(1);
    expect(lanes.memo('request', 'a', () => ({ n: 1 }))).toBeUndefined(); // no lane yet
    lanes.get('request', 'a', counting);
    const memo = lanes.memo('request', 'a', () => ({ n: 1 }));
    expect(lanes.memo('request', 'a', () => ({ n: 2 }))).toBe(memo);
    lanes.get('request', 'b', counting);
    lanes.get('tool_call', 'b', counting);
    lanes.get('tool_result', 'b', counting); // past 3 lanes: a's request lane (least recent) goes
    lanes.get('request', 'a', counting); // a new lane for a
    expect(lanes.memo('request', 'a', () => ({ n: 3 }))).toEqual({ n: 3 });
    lanes.end('a');
    expect(lanes.memo('request', 'a', () => ({ n: 4 }))).toBeUndefined();
    lanes.closeAll();
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
    // One byte: each other session's request drops every lane but its own, `a`'s included.
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
