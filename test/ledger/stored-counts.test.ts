/**
 * Token counts shared through the vault's count store (src/ledger/stored-counts.ts): a process
 * meeting a conversation another process measured reads the counts of its large items instead of
 * tokenizing them again, and reduces it exactly as a process that tokenized everything.
 */
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTiktokenCounter } from '../../src/measure/index.js';
import type { TokenCounter } from '../../src/measure/types.js';
import { createTerminator, type Terminator } from '../../src/runtime/index.js';
import { STORED_MIN_CHARS, UNSEEN_MIN } from '../../src/ledger/stored-counts.js';
import type { ProviderRequest, Step } from '../../src/step.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'tt-stored-counts-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** An exact counter that tokenizes on every call (no memo) and adds up what it tokenized. */
function countingCounter(): TokenCounter & { tokenized: number; largest: number } {
  const inner = createTiktokenCounter('o200k_base');
  const counter = {
    name: inner.name,
    exact: true,
    countsKey: inner.countsKey!,
    tokenized: 0,
    largest: 0,
    count(text: string): number {
      counter.tokenized += text.length;
      counter.largest = Math.max(counter.largest, text.length);
      return inner.count(text);
    },
    dispose: () => inner.dispose?.(),
  };
  return counter;
}

/** A coding session: every tool output a few KB (all large enough to be stored), some repeated. */
function conversation(turns: number): Record<string, unknown>[] {
  const messages: Record<string, unknown>[] = [
    { role: 'system', content: 'You are a coding agent.' },
    { role: 'user', content: 'Make the tests pass in packages/core.' },
  ];
  for (let t = 0; t < turns; t++) {
    const id = `call_${t}`;
    messages.push({
      role: 'assistant',
      content: `Turn ${t}: running the suite again.`,
      tool_calls: [
        { id, type: 'function', function: { name: 'terminal', arguments: `{"command":"npm test -- ${t % 4}"}` } },
      ],
    });
    const lines = Array.from(
      { length: 60 + (t % 5) * 20 },
      (_, i) =>
        `packages/core/src/mod_${t % 4}.ts:${i + 1}: ${i % 17 === 0 ? 'FAIL' : 'ok'} case ${i} (${(t % 3) * i} ms)`,
    );
    messages.push({ role: 'tool', tool_call_id: id, content: lines.join('\n') });
  }
  return messages;
}

const requestAt = (messages: readonly Record<string, unknown>[], n: number): ProviderRequest =>
  ({ model: 'gpt-4o', messages: structuredClone(messages.slice(0, n)) }) as ProviderRequest;

const open = (path: string, counter: TokenCounter): Promise<Terminator> =>
  createTerminator({ env: {}, counter, overrides: { dbPath: path } });

/** What the model gets and what telemetry recorded (tokens included): equal only if every count is. */
async function seen(tt: Terminator, out: Step<ProviderRequest>): Promise<unknown> {
  await tt.settled();
  return {
    value: out.value,
    decisions: out.decisions,
    metrics: await tt.vault.metricsSummary(),
  };
}

describe('token counts shared through the vault', () => {
  it('a second process reads the counts of the history the first tokenized, and reduces it exactly alike', async () => {
    const messages = conversation(30);
    const first = countingCounter();
    const a = await open(join(dir, 'a.sqlite3'), first);
    for (let n = 4; n <= messages.length; n += 2) await a.reduceRequest(requestAt(messages, n), { sessionId: 's' });
    await a.close();
    // The same store without the counts: a process that has to tokenize everything.
    copyFileSync(join(dir, 'a.sqlite3'), join(dir, 'b.sqlite3'));
    const raw = new Database(join(dir, 'b.sqlite3'));
    expect(raw.prepare('select count(*) from token_counts').pluck().get()).toBeGreaterThan(20);
    raw.prepare('delete from token_counts').run();
    raw.close();

    const whole = requestAt(messages, messages.length);
    const withCounts = countingCounter();
    const b = await open(join(dir, 'a.sqlite3'), withCounts);
    const without = countingCounter();
    const c = await open(join(dir, 'b.sqlite3'), without);
    // A new session on each (the host's id is new to these processes), whole history at once.
    const fromStore = await seen(b, await b.reduceRequest(whole, { sessionId: 'moved' }));
    const counted = await seen(c, await c.reduceRequest(structuredClone(whole), { sessionId: 'moved' }));
    expect(fromStore).toEqual(counted);
    // Every large item came from the store, for the stages and for telemetry alike: what was left
    // to tokenize is the small items and the final request's new texts.
    expect(withCounts.largest).toBeLessThan(STORED_MIN_CHARS);
    expect(without.largest).toBeGreaterThan(STORED_MIN_CHARS);
    expect(withCounts.tokenized).toBeLessThan(without.tokenized / 2);
    await b.close();
    await c.close();
  });

  it('asks the store only when a request brings many items this process has not seen for its session', async () => {
    const messages = conversation(12);
    const counter = countingCounter();
    const tt = await open(join(dir, 'v.sqlite3'), counter);
    const asked: number[] = [];
    const lookup = tt.vault.tokenCounts;
    tt.vault.tokenCounts = (key, hashes) => (asked.push(hashes.length), lookup(key, hashes));
    await tt.reduceRequest(requestAt(messages, messages.length - 4), { sessionId: 's' });
    for (let n = messages.length - 2; n <= messages.length; n += 2)
      await tt.reduceRequest(requestAt(messages, n), { sessionId: 's' });
    // One look-up, for the first request's large items; the two that appended an exchange asked nothing.
    expect(asked).toHaveLength(1);
    expect(asked[0]).toBeGreaterThanOrEqual(8);
    expect(UNSEEN_MIN).toBeGreaterThan(2);
    // Another session meeting the same history in this process finds it counted: nothing to ask.
    await tt.reduceRequest(requestAt(messages, messages.length), { sessionId: 'other' });
    expect(asked).toHaveLength(1);
    // A new history in a new session: asked again.
    const next = conversation(14).map((m) => ({ ...m, content: `${String(m['content'])} (another project)` }));
    await tt.reduceRequest(requestAt(next, next.length), { sessionId: 'third' });
    expect(asked).toHaveLength(2);
    await tt.close();
  });

  it('writes back only items of at least STORED_MIN_CHARS, once they are counted', async () => {
    const counter = countingCounter();
    const tt = await open(join(dir, 'v.sqlite3'), counter);
    const small = { role: 'user', content: 'short question' };
    const large = { role: 'user', content: 'x '.repeat(STORED_MIN_CHARS) };
    await tt.reduceRequest({ model: 'gpt-4o', messages: [small, large] } as ProviderRequest, { sessionId: 's' });
    await tt.settled();
    const path = tt.vault.path;
    await tt.close();
    const raw = new Database(path, { readonly: true });
    const rows = raw.prepare('select counter, compact_tokens from token_counts').all() as {
      counter: string;
      compact_tokens: number | null;
    }[];
    raw.close();
    expect(rows).toEqual([{ counter: counter.countsKey, compact_tokens: expect.any(Number) }]);
  });

  it('reduces exactly alike when the store fails (fail-open), and a counter without a countsKey shares nothing', async () => {
    const messages = conversation(10);
    const failing = countingCounter();
    const a = await open(join(dir, 'a.sqlite3'), failing);
    a.vault.tokenCounts = () => Promise.reject(new Error('store down'));
    a.vault.recordTokenCounts = () => Promise.reject(new Error('store down'));
    const plain = createTiktokenCounter('o200k_base');
    const keyless: TokenCounter = { name: plain.name, exact: true, count: (t) => plain.count(t) };
    const b = await open(join(dir, 'b.sqlite3'), keyless);
    const asked: string[] = [];
    const lookup = b.vault.tokenCounts;
    b.vault.tokenCounts = (key, hashes) => (asked.push(key), lookup(key, hashes));
    const whole = requestAt(messages, messages.length);
    expect(await seen(a, await a.reduceRequest(whole, { sessionId: 's' }))).toEqual(
      await seen(b, await b.reduceRequest(structuredClone(whole), { sessionId: 's' })),
    );
    expect(asked).toEqual([]);
    await a.close();
    await b.close();
    plain.dispose?.();
  });
});
