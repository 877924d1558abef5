import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { PACKAGE_VERSION } from '../../src/config/version.js';
import { ConfigError } from '../../src/errors.js';
import {
  BudgetCounterError,
  buildTokenizePayload,
  createVllmCounter,
  type BudgetCounter,
} from '../../src/budget/index.js';
import { closedPortUrl, deepFreeze, TokenizeServer } from './helpers.js';

const chat = deepFreeze({
  model: 'qwen3',
  messages: [
    { role: 'user', content: 'hi' },
    { role: 'assistant', content: 'ok', reasoning_content: 'thinking…' },
  ],
  tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
  reasoning_effort: 'high',
  max_tokens: 100,
});

const signal = (): AbortSignal => new AbortController().signal;

async function failureKind(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'resolved';
  } catch (error) {
    return error instanceof BudgetCounterError ? error.kind : `other:${String(error)}`;
  }
}

describe('buildTokenizePayload (unit)', () => {
  it('mirrors messages, tools and chat_template_kwargs the way incontext does', () => {
    const payload = buildTokenizePayload(chat);
    expect(payload).toEqual({
      model: 'qwen3',
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: 'ok', reasoning: 'thinking…' },
      ],
      tools: chat.tools,
      chat_template_kwargs: { reasoning_effort: 'high', enable_thinking: true },
      add_generation_prompt: true,
    });
  });

  it('lets extra_body win and keeps explicit kwargs', () => {
    const payload = buildTokenizePayload({
      model: 'a',
      messages: [],
      reasoning_effort: 'none',
      extra_body: {
        model: 'b',
        chat_template_kwargs: { enable_thinking: true },
        documents: [{ t: 1 }],
        add_generation_prompt: false,
      },
    });
    expect(payload).toEqual({
      model: 'b',
      messages: [],
      add_generation_prompt: false,
      chat_template_kwargs: { enable_thinking: true, documents: [{ t: 1 }], reasoning_effort: 'none' },
    });
  });

  it('refuses what /tokenize cannot mirror', () => {
    expect(() => buildTokenizePayload({ messages: [], tool_choice: 'required' })).toThrow(BudgetCounterError);
    expect(() =>
      buildTokenizePayload({ messages: [], tool_choice: { type: 'function', function: { name: 'f' } } }),
    ).toThrow(/tool_choice/);
    expect(() => buildTokenizePayload({ messages: [], response_format: { type: 'json_object' } })).toThrow(
      /response_format/,
    );
    expect(() => buildTokenizePayload({ input: 'responses request' })).toThrow(/not a chat request/);
    expect(() => buildTokenizePayload({ messages: [], tool_choice: 'auto' })).not.toThrow();
  });

  it('rejects bad configuration with ConfigError naming the variable', () => {
    expect(() => createVllmCounter({ url: 'not a url' })).toThrow(ConfigError);
    expect(() => createVllmCounter({ url: 'ftp://h/tokenize' })).toThrow(/INCONTEXT_TOKENIZER_URL/);
    expect(() => createVllmCounter({ url: 'http://h/tokenize', timeoutSeconds: 0 })).toThrow(
      /INCONTEXT_TOKENIZER_TIMEOUT_SECONDS/,
    );
    for (const cacheEntries of [-1, 2.5, Infinity])
      expect(() => createVllmCounter({ url: 'http://h/tokenize', cacheEntries })).toThrow(
        /createVllmCounter: options\.cacheEntries must be an integer ≥ 0/,
      );
    expect(() => createVllmCounter({ url: 'http://h/tokenize', cacheEntries: 0 })).not.toThrow();
  });
});

describe('vllm counter against a real /tokenize server on loopback', () => {
  const server = new TokenizeServer();
  let url = '';
  const counters: BudgetCounter[] = [];
  const make = (extra: Partial<Parameters<typeof createVllmCounter>[0]> = {}): BudgetCounter => {
    const c = createVllmCounter({ url, contextLength: 32_768, timeoutSeconds: 5, ...extra });
    counters.push(c);
    return c;
  };

  beforeAll(async () => {
    url = await server.listen();
  });
  beforeEach(() => {
    server.mode = 'ok';
    server.received.length = 0;
  });
  afterAll(async () => {
    await Promise.all(counters.map((c) => c.close?.()));
    await server.close();
  });

  it('200: returns the count, sends the payload with the package user agent, caches by payload', async () => {
    const counter = make();
    expect(await counter.countRequest(chat, signal())).toBe(1000);
    expect(await counter.countRequest(structuredClone(chat), signal())).toBe(1000);
    expect(server.received).toHaveLength(1);
    const [got] = server.received;
    expect(got?.path).toBe('/tokenize');
    expect(got?.headers['user-agent']).toBe(`token-terminator/${PACKAGE_VERSION}`);
    expect(got?.headers['content-type']).toBe('application/json');
    expect(got?.body).toEqual(buildTokenizePayload(chat));
    counter.clearCache?.();
    await counter.countRequest(chat, signal());
    expect(server.received).toHaveLength(2);
  });

  it('sends URL credentials as Basic auth, not in the request line', async () => {
    const counter = make({ url: url.replace('http://', 'http://us%40er:p%3Ass@') });
    await counter.countRequest(chat, signal());
    expect(server.received[0]?.headers['authorization']).toBe(`Basic ${Buffer.from('us@er:p:ss').toString('base64')}`);
    expect(server.received[0]?.path).toBe('/tokenize');
  });

  it('keys the cache by context length too', async () => {
    const counter = make();
    await counter.countRequest(chat, signal(), { contextLength: 32_768 });
    expect(await failureKind(counter.countRequest(chat, signal(), { contextLength: 8192 }))).toBe('context_mismatch');
    expect(server.received).toHaveLength(2);
  });

  it('500 → http_status', async () => {
    server.mode = 'status500';
    expect(await failureKind(make().countRequest(chat, signal()))).toBe('http_status');
  });

  it('garbage body → bad_body; negative count → bad_body', async () => {
    server.mode = 'garbage';
    expect(await failureKind(make().countRequest(chat, signal()))).toBe('bad_body');
    server.mode = 'negative';
    expect(await failureKind(make().countRequest(chat, signal()))).toBe('bad_body');
  });

  it('wrong max_model_len → context_mismatch', async () => {
    server.mode = 'wrongLength';
    expect(await failureKind(make().countRequest(chat, signal()))).toBe('context_mismatch');
  });

  it('no response within INCONTEXT_TOKENIZER_TIMEOUT_SECONDS → timeout', async () => {
    server.mode = 'hang';
    expect(await failureKind(make({ timeoutSeconds: 0.3 }).countRequest(chat, signal()))).toBe('timeout');
  });

  it('connection refused → connection', async () => {
    const counter = createVllmCounter({ url: await closedPortUrl(), contextLength: 32_768, timeoutSeconds: 5 });
    counters.push(counter);
    expect(await failureKind(counter.countRequest(chat, signal()))).toBe('connection');
  });

  it('refuses tool_choice / response_format without calling the server', async () => {
    expect(await failureKind(make().countRequest({ ...chat, tool_choice: 'required' }, signal()))).toBe('unsupported');
    expect(
      await failureKind(make().countRequest({ ...chat, response_format: { type: 'json_object' } }, signal())),
    ).toBe('unsupported');
    expect(server.received).toHaveLength(0);
  });

  it('needs a context length to validate max_model_len', async () => {
    const counter = createVllmCounter({ url });
    counters.push(counter);
    expect(await failureKind(counter.countRequest(chat, signal()))).toBe('no_context_length');
  });

  it('uses kv_transfer_params.prompt_token_ids directly and clamps to truncate_prompt_tokens', async () => {
    expect(
      await make().countRequest(
        { ...chat, extra_body: { kv_transfer_params: { prompt_token_ids: [1, 2, 3] } } },
        signal(),
      ),
    ).toBe(3);
    const textOnly = {
      model: 'q',
      messages: [{ role: 'user', content: 'x' }],
      extra_body: { truncate_prompt_tokens: 10 },
    };
    expect(await make().countRequest(textOnly, signal())).toBe(10);
  });

  it('aborting the signal aborts the in-flight request: the server sees the socket close', async () => {
    server.mode = 'hang';
    const counter = make();
    const controller = new AbortController();
    const arrived = server.nextArrival();
    const pending = counter.countRequest(chat, controller.signal);
    await arrived;
    const before = server.closedWhileHanging;
    controller.abort(new Error('unsubscribed'));
    await expect(pending).rejects.toThrow('unsubscribed');
    await expect.poll(() => server.closedWhileHanging).toBe(before + 1);
  });
});
