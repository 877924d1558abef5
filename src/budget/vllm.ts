/**
 * The `vllm` budget backend: vLLM's `POST /tokenize` (server root, not /v1) applies the served
 * model's real chat template to messages, tools and chat_template_kwargs and returns
 * `{count, max_model_len, tokens}`.
 *
 * The endpoint sees prompt content by design and vLLM's API-key check does not cover it: keep it on
 * a trusted network path. Nothing here logs content or the URL.
 */
import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { Agent, request as undiciRequest } from 'undici';
import { PACKAGE_VERSION } from '../config/version.js';
import { ConfigError } from '../errors.js';
import { isObj } from '../model/read.js';
import { intOption } from '../options.js';
import { canonicalJson } from '../measure/index.js';
import type { ProviderRequest } from '../step.js';
import { BudgetCounterError, type BudgetCounter, type CountContext } from './counter.js';
import { extraBody } from './request-caps.js';

/** Options of the vLLM `/tokenize` counter; only `url` is required. */
export interface VllmCounterOptions {
  /** The /tokenize URL (INCONTEXT_TOKENIZER_URL). Required. */
  readonly url: string;
  /** Per-request timeout in seconds (INCONTEXT_TOKENIZER_TIMEOUT_SECONDS). @defaultValue 30 */
  readonly timeoutSeconds?: number;
  /** User-Agent header (INCONTEXT_TOKENIZER_USER_AGENT). @defaultValue `token-terminator/<package version>` */
  readonly userAgent?: string;
  /** Context length used when a call passes none. @defaultValue none (such calls fall back) */
  readonly contextLength?: number;
  /** Remembered counts, keyed by sha256(payload + context length). @defaultValue 64 */
  readonly cacheEntries?: number;
}

type Obj = Readonly<Record<string, unknown>>;

const COPIED = [
  'add_generation_prompt',
  'continue_final_message',
  'add_special_tokens',
  'chat_template',
  'media_io_kwargs',
  'mm_processor_kwargs',
] as const;

/**
 * The /tokenize chat payload for a Chat Completions request (`extra_body` wins over top level):
 * model, messages (`reasoning_content` renamed to `reasoning`), tools, the template flags, and
 * chat_template_kwargs with `documents` and `reasoning_effort` merged in (`enable_thinking` =
 * effort ≠ "none" unless set); `add_generation_prompt` defaults to true. Throws
 * BudgetCounterError('unsupported') for what /tokenize cannot mirror: a tool_choice other than
 * absent/"auto", a response_format, or no messages array.
 *
 * @example
 * const body = buildTokenizePayload({ model: 'qwen3', messages: [{ role: 'user', content: 'hi' }] });
 * // POST body to the vLLM server's /tokenize endpoint (add_generation_prompt: true)
 */
export function buildTokenizePayload(request: ProviderRequest): Record<string, unknown> {
  const extra = extraBody(request) ?? {};
  const pick = (key: string): unknown => (extra[key] !== undefined ? extra[key] : request[key]);
  const toolChoice = pick('tool_choice');
  if (toolChoice !== undefined && toolChoice !== null && toolChoice !== 'auto')
    throw new BudgetCounterError('unsupported', 'tool_choice cannot be mirrored by /tokenize');
  const responseFormat = pick('response_format');
  if (responseFormat !== undefined && responseFormat !== null)
    throw new BudgetCounterError('unsupported', 'response_format cannot be mirrored by /tokenize');
  const messages = pick('messages');
  if (!Array.isArray(messages)) throw new BudgetCounterError('unsupported', 'not a chat request');
  const payload: Record<string, unknown> = {};
  const model = pick('model');
  if (typeof model === 'string') payload['model'] = model;
  payload['messages'] = messages.map((m: unknown) => {
    if (!isObj(m) || !('reasoning_content' in m)) return m;
    const { reasoning_content: reasoning, ...rest } = m;
    return 'reasoning' in rest ? rest : { ...rest, reasoning };
  });
  const tools = pick('tools');
  if (Array.isArray(tools)) payload['tools'] = tools;
  for (const key of COPIED) if (pick(key) !== undefined) payload[key] = pick(key);
  const given = pick('chat_template_kwargs');
  const kwargs: Record<string, unknown> = isObj(given) ? { ...given } : {};
  const documents = pick('documents');
  if (documents !== undefined && !('documents' in kwargs)) kwargs['documents'] = documents;
  const effort = pick('reasoning_effort');
  if (effort !== undefined && effort !== null) {
    if (!('reasoning_effort' in kwargs)) kwargs['reasoning_effort'] = effort;
    if (!('enable_thinking' in kwargs)) kwargs['enable_thinking'] = effort !== 'none';
  }
  if (Object.keys(kwargs).length > 0) payload['chat_template_kwargs'] = kwargs;
  if (payload['add_generation_prompt'] === undefined) payload['add_generation_prompt'] = true;
  return payload;
}

/** Known prompt length without asking the server: kv_transfer_params.prompt_token_ids. */
function knownPromptLength(request: ProviderRequest): number | undefined {
  const extra = extraBody(request);
  const kv = extra?.['kv_transfer_params'] ?? request['kv_transfer_params'];
  const ids = isObj(kv) ? kv['prompt_token_ids'] : undefined;
  return Array.isArray(ids) ? ids.length : undefined;
}

/** extra_body.truncate_prompt_tokens clamps text-only prompts. */
function truncation(request: ProviderRequest, payload: Obj): number | undefined {
  const t = extraBody(request)?.['truncate_prompt_tokens'] ?? request['truncate_prompt_tokens'];
  if (typeof t !== 'number' || !Number.isSafeInteger(t) || t <= 0) return undefined;
  const messages = payload['messages'];
  const textOnly =
    Array.isArray(messages) &&
    messages.every(
      (m: unknown) =>
        isObj(m) && (typeof m['content'] === 'string' || m['content'] === null || m['content'] === undefined),
    );
  return textOnly ? t : undefined;
}

function failureOf(error: unknown, timedOut: boolean): BudgetCounterError {
  if (error instanceof BudgetCounterError) return error;
  if (timedOut || /^UND_ERR_(?:HEADERS|BODY|CONNECT)_TIMEOUT$/.test(String((error as { code?: unknown } | null)?.code)))
    return new BudgetCounterError('timeout', '/tokenize timed out', { cause: error });
  return new BudgetCounterError('connection', '/tokenize request failed', { cause: error });
}

/** The endpoint's URL without credentials, and the headers (Basic auth from the URL's user:password). */
function tokenizeEndpoint(given: string): { url: URL; headers: Record<string, string> } {
  let url: URL;
  try {
    url = new URL(given);
  } catch {
    throw new ConfigError(
      'INCONTEXT_TOKENIZER_URL must be an absolute http(s) URL of the /tokenize endpoint (required by INCONTEXT_BACKEND=vllm)',
    );
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new ConfigError('INCONTEXT_TOKENIZER_URL must use http or https');
  // undici ignores user:password in a URL; send them as Basic auth and keep them out of the URL.
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
  if (url.username !== '' || url.password !== '') {
    const credentials = `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`;
    headers['authorization'] = `Basic ${Buffer.from(credentials, 'utf8').toString('base64')}`;
    url.username = '';
    url.password = '';
  }
  return { url, headers };
}

/** The count of a /tokenize answer, checked: a valid count, and the server's max_model_len the configured one. */
function answeredCount(answer: unknown, contextLength: number): number {
  const c = isObj(answer) ? answer['count'] : undefined;
  const len = isObj(answer) ? answer['max_model_len'] : undefined;
  const atLeast = (n: unknown, min: number): n is number => Number.isSafeInteger(n) && (n as number) >= min;
  if (!atLeast(c, 0) || !atLeast(len, 1))
    throw new BudgetCounterError('bad_body', '/tokenize answered without a valid count and max_model_len');
  if (len !== contextLength)
    throw new BudgetCounterError(
      'context_mismatch',
      `/tokenize max_model_len ${len} differs from the configured context length ${contextLength}`,
    );
  return c;
}

/**
 * Create the vLLM /tokenize counter. Configuration errors (no URL, not http(s), bad numbers) throw
 * ConfigError at once; counting failures reject with BudgetCounterError so the budget falls back.
 * An aborted signal aborts the in-flight HTTP request.
 *
 * @example
 * const vllm = createVllmCounter({ url: 'http://127.0.0.1:8000/tokenize', contextLength: 131072 });
 * const p = await vllm.countRequest(request, AbortSignal.timeout(5000));
 */
export function createVllmCounter(options: VllmCounterOptions): BudgetCounter {
  const { url, headers } = tokenizeEndpoint(options.url);
  const timeoutSeconds = options.timeoutSeconds ?? 30;
  if (!(timeoutSeconds > 0) || !Number.isFinite(timeoutSeconds))
    throw new ConfigError('INCONTEXT_TOKENIZER_TIMEOUT_SECONDS must be a positive number');
  const timeoutMs = Math.ceil(timeoutSeconds * 1000);
  const userAgent = options.userAgent || `token-terminator/${PACKAGE_VERSION}`;
  // Least recently used first out; 0 remembers nothing.
  const maxEntries = intOption('createVllmCounter', 'cacheEntries', options.cacheEntries, 64, 0);
  const cache = maxEntries >= 1 ? new LRUCache<string, number>({ max: maxEntries }) : undefined;
  let agent: Agent | undefined;

  const post = async (body: string, signal: AbortSignal): Promise<unknown> => {
    agent ??= new Agent({
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      connectTimeout: timeoutMs,
      keepAliveTimeout: 4000,
    });
    const timer = AbortSignal.timeout(timeoutMs);
    const combined = AbortSignal.any([signal, timer]);
    try {
      const res = await undiciRequest(url, {
        method: 'POST',
        dispatcher: agent,
        headers: { ...headers, 'user-agent': userAgent },
        body,
        signal: combined,
      });
      if (res.statusCode !== 200) {
        await res.body.dump();
        throw new BudgetCounterError('http_status', `/tokenize answered HTTP ${res.statusCode}`);
      }
      try {
        return await res.body.json();
      } catch (error) {
        if (combined.aborted) throw error;
        throw new BudgetCounterError('bad_body', '/tokenize answered a body that is not JSON', { cause: error });
      }
    } catch (error) {
      if (signal.aborted) throw signal.reason;
      throw failureOf(error, timer.aborted);
    }
  };

  return {
    name: 'vllm',
    exact: true,
    async countRequest(request: ProviderRequest, signal: AbortSignal, context?: CountContext): Promise<number> {
      const known = knownPromptLength(request);
      if (known !== undefined) return known;
      const contextLength = context?.contextLength ?? options.contextLength;
      if (contextLength === undefined)
        throw new BudgetCounterError(
          'no_context_length',
          'no configured context length to check max_model_len against',
        );
      const payload = buildTokenizePayload(request);
      const body = canonicalJson(payload, { compact: true });
      const key = createHash('sha256').update(`${body}\u0000${contextLength}`, 'utf8').digest('hex');
      let count = cache?.get(key);
      if (count === undefined) {
        count = answeredCount(await post(body, signal), contextLength);
        cache?.set(key, count);
      }
      const limit = truncation(request, payload);
      return limit === undefined ? count : Math.min(count, limit);
    },
    clearCache: () => cache?.clear(),
    async close(): Promise<void> {
      const a = agent;
      agent = undefined;
      cache?.clear();
      await a?.close();
    },
  };
}
