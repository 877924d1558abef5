import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  EMPTY_RECOVERY_STATE,
  anchorDigest,
  applyExchanges,
  recordExchange,
  showExchanges,
  type AnchoredExchange,
} from '../../src/recovery/exchanges.js';
import { artifactIdFor } from '../../src/vault/identity.js';

const OUTPUT = 'line\n'.repeat(2000);
const ID = artifactIdFor(OUTPUT);

/** An Anthropic conversation whose test run (call `callId`) carries OUTPUT; the newest item holds the cache marker. */
const conversation = (callId: string, marked: boolean) => ({
  system: 'agent',
  messages: [
    { role: 'user', content: 'run the tests' },
    { role: 'assistant', content: [{ type: 'tool_use', id: callId, name: 'Bash', input: { command: 'pytest' } }] },
    {
      role: 'user',
      content: [
        {
          type: 'tool_result',
          tool_use_id: callId,
          content: OUTPUT,
          ...(marked ? { cache_control: { type: 'ephemeral' } } : {}),
        },
      ],
    },
  ],
});

const exchange = [
  {
    role: 'assistant',
    content: [{ type: 'tool_use', id: 'tt-1', name: 'token_terminator', input: { artifact_id: ID } }],
  },
  { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'tt-1', content: '{"content":"…"}' }] },
];

describe('showExchanges', () => {
  it('rejoins a recovered output in its own conversation, after the client moved its cache marker', () => {
    const state = recordExchange(EMPTY_RECOVERY_STATE, conversation('call-1', true), 'anthropic', exchange, undefined);
    const next = { ...conversation('call-1', false), messages: [...conversation('call-1', false).messages] };
    const shown = showExchanges(next, 'anthropic', state);
    expect([...shown.rejoined.keys()]).toEqual(['call-1']);
    expect(shown.request).toBe(next);
  });

  it('leaves a new conversation that reuses the session id and carries the same output alone', () => {
    const state = recordExchange(EMPTY_RECOVERY_STATE, conversation('call-1', true), 'anthropic', exchange, undefined);
    const other = conversation('call-2', true);
    const shown = showExchanges(other, 'anthropic', state);
    expect(shown.rejoined.size).toBe(0);
    expect(shown.request).toBe(other);
  });
});

describe('applyExchanges', () => {
  it('inserts each matching exchange right after its anchor, in anchor order, and nothing else', () => {
    const items = fc.array(fc.record({ role: fc.constantFrom('user', 'assistant'), content: fc.string() }), {
      minLength: 1,
      maxLength: 12,
    });
    fc.assert(
      fc.property(items, fc.array(fc.tuple(fc.nat(14), fc.boolean()), { maxLength: 6 }), (messages, marks) => {
        // Some anchors point past the list, and some digests name another item: neither may insert.
        const exchanges: AnchoredExchange[] = marks
          .map(([anchor, matches], k) => ({
            anchor,
            digest: matches && anchor >= 1 && anchor <= messages.length ? anchorDigest(messages[anchor - 1]) : 'other',
            items: [{ role: 'user', content: `exchange ${k}` }],
          }))
          .sort((a, b) => a.anchor - b.anchor);
        const expected = messages.flatMap((m, i) => [
          m,
          ...exchanges.filter((e) => e.anchor === i + 1 && e.digest !== 'other').flatMap((e) => e.items),
        ]);
        const request = { model: 'm', messages };
        const out = applyExchanges(request, 'chat', { ...EMPTY_RECOVERY_STATE, exchanges });
        if (expected.length === messages.length) expect(out).toBe(request);
        else expect(out).toEqual({ model: 'm', messages: expected });
      }),
    );
  });
});
