import { describe, expect, it } from 'vitest';
import { budgetCounterFrom, roughRequestTokens } from '../../src/budget/index.js';
import type { TokenCounter } from '../../src/measure/index.js';

const signal = new AbortController().signal;

function spy(): TokenCounter & { texts: string[] } {
  const texts: string[] = [];
  return { name: 'spy', exact: true, texts, count: (t: string) => (texts.push(t), t.length) };
}

describe('budgetCounterFrom', () => {
  it('counts each prompt part once across requests (content memo), skipping cap fields', async () => {
    const inner = spy();
    const counter = budgetCounterFrom(inner);
    const request = { model: 'm', messages: [{ role: 'user', content: 'hello' }], max_tokens: 5 };
    const n = await counter.countRequest(request, signal);
    expect(n).toBe('model'.length + '"m"'.length + 'messages'.length + '{"content":"hello","role":"user"}'.length);
    const calls = inner.texts.length;
    const grown = { ...structuredClone(request), messages: [...request.messages, { role: 'user', content: 'again' }] };
    await counter.countRequest(grown, signal);
    expect(inner.texts.slice(calls)).toEqual(['{"content":"again","role":"user"}']);
  });

  it('sees in-place mutation without the identity cache, and reuses per-object counts with it', async () => {
    const message = { role: 'user', content: 'short' };
    const request = { messages: [message] };
    const plain = budgetCounterFrom(spy());
    const byIdentity = budgetCounterFrom(spy(), { identityCache: true });
    const a = await plain.countRequest(request, signal);
    expect(await byIdentity.countRequest(request, signal)).toBe(a);
    message.content = 'much longer content now';
    expect(await plain.countRequest(request, signal)).toBeGreaterThan(a);
    // Documented trade-off: identity caching assumes history objects are never mutated.
    expect(await byIdentity.countRequest(request, signal)).toBe(a);
    byIdentity.clearCache?.();
    expect(await byIdentity.countRequest(request, signal)).toBeGreaterThan(a);
  });

  it('rejects when the signal is already aborted', async () => {
    const controller = new AbortController();
    controller.abort(new Error('gone'));
    await expect(budgetCounterFrom(spy()).countRequest({ messages: [] }, controller.signal)).rejects.toThrow('gone');
  });

  it('estimates roughly a quarter of the serialized prompt chars', () => {
    expect(roughRequestTokens({ messages: [{ role: 'user', content: 'x'.repeat(400) }], max_tokens: 9 })).toBe(
      2 + Math.ceil(('{"content":"' + 'x'.repeat(400) + '","role":"user"}').length / 4),
    );
  });
});
