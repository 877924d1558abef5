import { describe, expect, it } from 'vitest';
import { EMPTY_RECOVERY_STATE, recordExchange, showExchanges } from '../../src/recovery/exchanges.js';
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
