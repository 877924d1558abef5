/**
 * Hash once: the SHA-256 passes over a new tool output's bytes, counted by wrapping `createHash`
 * on the builtin (every module's `node:crypto` import then is this wrapper). A pass is one hash whose input holds the
 * whole output, raw or JSON-escaped (as the gateway sees it inside a request body); a hash of a
 * compacted view or of a short key does not count.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Hash } from 'node:crypto';
import { createRequire, syncBuiltinESMExports } from 'node:module';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { wrapOpenAI } from '../../adapters/custom-loop/index.js';
import { createTerminator } from '../../src/runtime/index.js';
import { startHarness, testRunOutput } from '../proxy/support/harness.js';

const watch = { needles: [] as string[], passes: 0 };

/**
 * A hash that counts one pass when the bytes given to it hold a needle. A copy starts empty: it
 * continues the state of what was hashed before without passing over those bytes again.
 */
function wrap(hash: Hash): Hash {
  let seen = '';
  let counted = false;
  const update = hash.update.bind(hash) as (data: unknown, encoding?: unknown) => unknown;
  const copy = hash.copy.bind(hash);
  return Object.assign(hash, {
    update(data: unknown, encoding?: unknown) {
      seen += typeof data === 'string' ? data : Buffer.from(data as Uint8Array).toString('utf8');
      if (!counted && watch.needles.some((n) => seen.includes(n))) {
        counted = true;
        watch.passes += 1;
        if (process.env['HASH_COUNT_STACKS']) console.log(new Error().stack?.split('\n').slice(2, 7).join('\n'));
      }
      update(data, encoding);
      return hash;
    },
    copy: () => wrap(copy()),
  });
}

// Installed on the builtin and synced into its ESM bindings: every module's `createHash` is this
// one (the test files share one module graph, so a module mock would miss modules loaded before).
const crypto = createRequire(import.meta.url)('node:crypto') as typeof import('node:crypto');
const originalCreateHash = crypto.createHash;
beforeAll(() => {
  crypto.createHash = ((...args: Parameters<typeof originalCreateHash>) => {
    const hash = originalCreateHash(...args);
    return watch.needles.length === 0 ? hash : wrap(hash);
  }) as typeof crypto.createHash;
  syncBuiltinESMExports();
});
afterAll(() => {
  crypto.createHash = originalCreateHash;
  syncBuiltinESMExports();
});

/** Count the passes over `output` while `run` runs. */
async function passesOver(output: string, run: () => Promise<unknown>): Promise<number> {
  watch.needles = [output, JSON.stringify(output).slice(1, -1)];
  watch.passes = 0;
  try {
    await run();
    return watch.passes;
  } finally {
    watch.needles = [];
  }
}

const output = (seed: number): string => testRunOutput(1500, seed);

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'tt-hash-count-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const conversation = (content: string, turns = 1) => ({
  model: 'gpt-4o',
  messages: [
    { role: 'system', content: 'You are a coding agent. Use the tools.' },
    { role: 'user', content: 'Run the tests.' },
    {
      role: 'assistant',
      content: null,
      tool_calls: [
        { id: 'run-1', type: 'function', function: { name: 'terminal', arguments: '{"command":"npm test"}' } },
      ],
    },
    { role: 'tool', tool_call_id: 'run-1', content },
    ...Array.from({ length: turns - 1 }, (_, i) => [
      { role: 'assistant', content: `Step ${i}: looking at the results.` },
      { role: 'user', content: `Go on (${i}).` },
    ]).flat(),
  ],
  tools: [
    {
      type: 'function',
      function: { name: 'terminal', parameters: { type: 'object', properties: { command: { type: 'string' } } } },
    },
  ],
});

const completion = {
  id: 'c',
  object: 'chat.completion',
  created: 0,
  model: 'gpt-4o',
  choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
};

describe('one SHA-256 pass over a new tool output', () => {
  it('library reduceToolResult: 1', async () => {
    await using tt = await createTerminator({ env: {}, overrides: { dbPath: join(dir, 'v.sqlite3') } });
    const raw = output(1);
    const result = { callId: 'c1', name: 'terminal', args: { command: 'npm test' }, content: raw };
    let content = '';
    const passes = await passesOver(raw, async () => {
      content = (await tt.reduceToolResult(result, { sessionId: 's1' })).value.content;
    });
    expect(content.length).toBeLessThan(raw.length); // it was reduced
    expect(passes).toBe(1);
  });

  it('custom loop (wrapOpenAI): 1 on the first request showing it, 0 on every later one', async () => {
    await using tt = await createTerminator({ env: {}, overrides: { dbPath: join(dir, 'v.sqlite3') } });
    const sent: string[] = [];
    const client = {
      chat: {
        completions: {
          create: async (body: unknown) => {
            sent.push(JSON.stringify(body));
            return completion;
          },
        },
      },
    };
    const openai = wrapOpenAI(client, tt, { sessionId: 'loop' });
    const raw = output(2);
    const first = await passesOver(raw, () => openai.chat.completions.create(conversation(raw) as never));
    expect(sent[0]).not.toContain(JSON.stringify(raw).slice(1, -1)); // it was reduced
    const later = await passesOver(raw, async () => {
      for (const turns of [2, 3]) await openai.chat.completions.create(conversation(raw, turns) as never);
    });
    expect({ first, later }).toEqual({ first: 1, later: 0 });
  });

  it('gateway: 1 on the first request showing it, 0 on every later one', async () => {
    const h = await startHarness(() => ({ json: completion }), { dir });
    await h.proxy.settled();
    try {
      const post = (body: unknown) =>
        fetch(`${h.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: 'Bearer sk-hash-count' },
          body: JSON.stringify(body),
        }).then((r) => r.text());
      const raw = output(3);
      // Each request's accounting (its measures) is settled inside the window that counts it.
      const first = await passesOver(raw, async () => {
        await post(conversation(raw));
        await h.proxy.settled();
      });
      expect(h.upstream.requests[0]!.body.toString('utf8')).not.toContain(JSON.stringify(raw).slice(1, -1));
      const later = await passesOver(raw, async () => {
        for (const turns of [2, 3]) await post(conversation(raw, turns));
        await h.proxy.settled();
      });
      expect({ first, later }).toEqual({ first: 1, later: 0 });
    } finally {
      await h.close();
    }
  });
});
