import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import { applyExchanges, EMPTY_RECOVERY_STATE, recordAlias, recordExchange } from '../../src/recovery/exchanges.js';
import { exchangeItems, splitCalls, stripRecoveryCalls } from '../../src/recovery/formats.js';
import { runRecoveryLoop } from '../../src/recovery/loop.js';
import { createStreamRound, createStreamState, SseParser, type SseEvent } from '../../src/recovery/stream.js';
import { chat, anthropic, responses } from '../proxy/support/upstream.js';

const sse = (reply: unknown): string => `${(reply as { sse: string[] }).sse.join('\n\n')}\n\n`;
type ChatCallDelta = { index: number; id?: string; function?: { arguments?: string } };
type ChatChunk = { choices: { delta: { tool_calls?: ChatCallDelta[] }; finish_reason: string | null }[] };
/** The Chat chunks a client got, `[DONE]` left out. */
const chatChunks = (out: string): ChatChunk[] =>
  new SseParser()
    .feed(out)
    .filter((e) => e.data !== '[DONE]')
    .map((e) => JSON.parse(e.data) as ChatChunk);
const json = (reply: unknown): Record<string, unknown> => (reply as { json: Record<string, unknown> }).json;

describe('SseParser', () => {
  test.prop([fc.array(fc.nat({ max: 4000 }), { maxLength: 12 })])(
    'yields the same events however the bytes are split',
    (cuts) => {
      const text = sse(
        chat.streamCalls([{ id: 'a', name: 'token_terminator', args: { action: 'status' } }], 'hi ünï 😀'),
      );
      const whole = new SseParser().feed(text);
      const parser = new SseParser();
      const points = [...new Set(cuts.map((c) => c % text.length))].sort((a, b) => a - b);
      const pieces: SseEvent[] = [];
      let from = 0;
      for (const p of [...points, text.length]) {
        pieces.push(...parser.feed(text.slice(from, p)));
        from = p;
      }
      pieces.push(...parser.end());
      expect(pieces).toEqual(whole);
      expect(whole.at(-1)!.data).toBe('[DONE]');
    },
  );
});

function play(format: 'chat' | 'responses' | 'anthropic', text: string, canContinue: boolean) {
  const round = createStreamRound(format, createStreamState(), canContinue);
  const out = new SseParser()
    .feed(text)
    .map((e) => round.push(e))
    .join('');
  return { out, end: round.finish() };
}

describe('stream rounds', () => {
  it('holds the end of a recovery-only chat round and never shows the call', () => {
    const { out, end } = play(
      'chat',
      sse(
        chat.streamCalls(
          [{ id: 'r1', name: 'token_terminator', args: { action: 'artifact_get', artifact_id: 'a_1' } }],
          'Let me look.',
        ),
      ),
      true,
    );
    expect(out).not.toContain('token_terminator');
    expect(out).not.toContain('Let me look.'); // the text beside a recovery call is not the client's answer
    expect(out).toContain('"role":"assistant"');
    expect(out).not.toContain('[DONE]');
    expect(end.holding).toBe(true);
    expect(end.recovery).toEqual([{ id: 'r1', arguments: '{"action":"artifact_get","artifact_id":"a_1"}' }]);
    expect(end.held).toContain('[DONE]');
  });

  const statusCall = { id: 'r1', name: 'token_terminator', args: { action: 'status' } };
  const lsCall = { id: 'c1', name: 'terminal', args: { command: 'ls' } };
  const playChat = (calls: Parameters<typeof chat.streamCalls>[0]) => play('chat', sse(chat.streamCalls(calls)), true);

  it('passes a mixed chat round on with the client call renumbered to index 0 and the recovery call removed', () => {
    const { out, end } = playChat([statusCall, lsCall]);
    const chunks = chatChunks(out);
    const calls = chunks.flatMap((c) => c.choices[0]!.delta.tool_calls ?? []);
    expect(calls.every((c) => c.index === 0)).toBe(true);
    expect(calls.find((c) => c.id !== undefined)?.id).toBe('c1');
    expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe('tool_calls');
    expect(end.holding).toBe(false);
    expect(end.others).toBe(1);
  });

  it('numbers several client calls 0, 1, … in their order, with their own ids and arguments, around recovery calls', () => {
    const { out, end } = playChat([
      statusCall,
      lsCall,
      { id: 'r2', name: 'token_terminator', args: { action: 'artifact_get', artifact_id: 'a_1' } },
      { id: 'c2', name: 'read_file', args: { path: 'src/a.ts' } },
    ]);
    const calls = chatChunks(out).flatMap((c) => c.choices[0]!.delta.tool_calls ?? []);
    const byIndex = new Map<number, { id: string; args: string }>();
    for (const c of calls) {
      const seen = byIndex.get(c.index) ?? { id: '', args: '' };
      byIndex.set(c.index, { id: seen.id + (c.id ?? ''), args: seen.args + (c.function?.arguments ?? '') });
    }
    expect([...byIndex.keys()]).toEqual([0, 1]);
    expect(byIndex.get(0)).toEqual({ id: 'c1', args: '{"command":"ls"}' });
    expect(byIndex.get(1)).toEqual({ id: 'c2', args: '{"path":"src/a.ts"}' });
    expect(out).not.toContain('token_terminator');
    expect(end.others).toBe(2);
    expect(end.recovery.map((r) => r.id)).toEqual(['r1', 'r2']);
  });

  const aside = 'Checking…'; // one word: the scripted streams split text at spaces
  const recover = { id: 'r1', name: 'token_terminator', args: { action: 'artifact_get', artifact_id: 'a_1' } };
  const own = { id: 'c1', name: 'terminal', args: { command: 'ls' } };
  for (const [format, stream] of [
    ['responses', responses.stream],
    ['anthropic', anthropic.stream],
  ] as const) {
    it(`${format}: drops the text of a recovery-only round and passes the client's rounds unchanged`, () => {
      for (const canContinue of [true, false]) {
        const recovery = play(format, sse(stream([{ text: aside }, recover])), canContinue);
        expect(recovery.out).not.toContain(aside);
        expect(recovery.out).not.toContain('token_terminator');
        expect(recovery.end.holding).toBe(canContinue);
      }
      for (const blocks of [[{ text: aside }, own], [{ text: aside }], [{ text: aside }, own, { text: 'more' }]]) {
        const text = sse(stream(blocks));
        const { out, end } = play(format, text, true);
        expect(out).toBe(text);
        expect(end.holding).toBe(false);
      }
    });
  }

  it('ends a recovery-only round as a finished turn when no round is left', () => {
    const { out, end } = play(
      'anthropic',
      sse(anthropic.stream([{ id: 'r1', name: 'token_terminator', args: { action: 'status' } }])),
      false,
    );
    expect(out).not.toContain('token_terminator');
    expect(out).toContain('"stop_reason":"end_turn"');
    expect(out).toContain('message_stop');
    expect(end.holding).toBe(false);
  });
});

describe('the whole-answer loop', () => {
  it('continues recovery-only turns, stops at the round budget, and strips what the client must not see', async () => {
    const sent: unknown[] = [];
    const call = json(chat.calls([{ id: 'r', name: 'token_terminator', args: { action: 'status' } }]));
    const out = await runRecoveryLoop({
      format: 'chat',
      request: { model: 'm', messages: [{ role: 'user', content: 'hi' }] },
      maxRounds: 2,
      send: (request) => {
        sent.push(request);
        return Promise.resolve(call);
      },
      bodyOf: (r) => r,
      answer: () => Promise.resolve('{"ok":true}'),
    });
    expect(sent).toHaveLength(3);
    expect(out.rounds).toBe(2);
    expect(out.stopped).toBe('rounds');
    expect(splitCalls(out.finalBody, 'chat').recovery).toHaveLength(0);
    expect((out.finalBody as { choices: { finish_reason: string }[] }).choices[0]!.finish_reason).toBe('stop');
    expect(out.exchange).toHaveLength(6);
  });

  it('keeps a mixed turn for the client and records the round', () => {
    const body = json(
      anthropic.calls(
        [
          { id: 'r', name: 'token_terminator', args: { action: 'status' } },
          { id: 'c', name: 'terminal', args: {} },
        ],
        'thinking aloud',
      ),
    );
    const stripped = stripRecoveryCalls(body, 'anthropic') as {
      content: { type: string; id?: string }[];
      stop_reason: string;
    };
    expect(stripped.content.map((b) => b.id ?? b.type)).toEqual(['text', 'c']);
    expect(stripped.stop_reason).toBe('tool_use');
    const items = exchangeItems(body, 'anthropic', new Map([['r', 'answer']])) as {
      role: string;
      content: { type: string; id?: string; tool_use_id?: string }[];
    }[];
    expect(items.map((i) => i.role)).toEqual(['assistant', 'user']);
    expect(items[0]!.content.map((b) => b.id ?? b.type)).toEqual(['text', 'r']);
    expect(items[1]!.content).toEqual([{ type: 'tool_result', tool_use_id: 'r', content: 'answer' }]);
  });
});

describe('exchanges', () => {
  it('shows a recorded exchange again after the item it followed, and nowhere when that item changed', () => {
    const request = {
      model: 'm',
      messages: [
        { role: 'user', content: 'a' },
        { role: 'tool', tool_call_id: 't', content: 'out' },
      ],
    };
    const exchange = [
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'r', type: 'function', function: { name: 'token_terminator', arguments: '{}' } }],
      },
      { role: 'tool', tool_call_id: 'r', content: 'x' },
    ];
    const state = recordExchange(EMPTY_RECOVERY_STATE, request, 'chat', exchange, undefined);
    const later = {
      ...request,
      messages: [...request.messages, { role: 'assistant', content: 'done' }, { role: 'user', content: 'next' }],
    };
    const shown = applyExchanges(later, 'chat', state) as { messages: unknown[] };
    expect(shown.messages).toEqual([...request.messages, ...exchange, ...later.messages.slice(2)]);
    const edited = {
      ...later,
      messages: [
        later.messages[0]!,
        { role: 'tool', tool_call_id: 't', content: 'different' },
        ...later.messages.slice(2),
      ],
    };
    expect(applyExchanges(edited, 'chat', state)).toBe(edited);
    const other = applyExchanges({ model: 'm', messages: [{ role: 'user', content: 'b' }] }, 'chat', state);
    expect((other as { messages: unknown[] }).messages).toHaveLength(1);
  });
});

describe('a stream spliced over a recovery round reads as one answer', () => {
  const recover = { id: 'tt-1', name: 'token_terminator', args: { action: 'artifact_get', artifact_id: 'a_1' } };
  /** Two rounds into one client stream: a recovery-only round, then the answer (its own upstream id). */
  function splice(format: 'chat' | 'responses', first: string, second: string): string {
    const state = createStreamState();
    const one = createStreamRound(format, state, true);
    let out = new SseParser()
      .feed(first)
      .map((e) => one.push(e))
      .join('');
    expect(one.finish().holding).toBe(true);
    state.round++;
    const two = createStreamRound(format, state, true);
    out += new SseParser()
      .feed(second)
      .map((e) => two.push(e))
      .join('');
    two.finish();
    return out;
  }

  it('Chat: every chunk carries the first round id, and the assistant role comes once', () => {
    const first = sse(chat.streamCalls([recover])).replaceAll('"cc-s"', '"chatcmpl-round-1"');
    const second = sse(chat.streamText(['The comma ', 'is accepted.'])).replaceAll('"cc-s"', '"chatcmpl-round-2"');
    const chunks = new SseParser()
      .feed(splice('chat', first, second))
      .filter((e) => e.data !== '[DONE]')
      .map((e) => JSON.parse(e.data) as { id?: string; choices: { delta: { role?: string; content?: string } }[] });
    expect(new Set(chunks.map((c) => c.id))).toEqual(new Set(['chatcmpl-round-1']));
    expect(chunks.filter((c) => c.choices[0]?.delta.role !== undefined)).toHaveLength(1);
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe('The comma is accepted.');
  });

  it('Responses: response.created and response.completed carry the same id', () => {
    const first = sse(responses.stream([recover], 'resp-round-1'));
    const second = sse(responses.stream([{ text: 'The comma is accepted.' }], 'resp-round-2'));
    const events = new SseParser()
      .feed(splice('responses', first, second))
      .map((e) => JSON.parse(e.data) as { type: string; response?: { id?: string } });
    const created = events.filter((e) => e.type === 'response.created');
    const completed = events.filter((e) => e.type === 'response.completed');
    expect(created).toHaveLength(1);
    expect(completed).toHaveLength(1);
    expect(created[0]!.response!.id).toBe('resp-round-1');
    expect(completed[0]!.response!.id).toBe('resp-round-1');
  });

  it('Responses: a request chaining to the id the client got is sent chaining to the last round', () => {
    const state = recordAlias(EMPTY_RECOVERY_STATE, { from: 'resp-round-1', to: 'resp-round-2' });
    const sent = applyExchanges({ previous_response_id: 'resp-round-1', input: 'next' }, 'responses', state);
    expect(sent['previous_response_id']).toBe('resp-round-2');
  });
});
