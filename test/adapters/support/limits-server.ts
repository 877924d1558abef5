/**
 * A loopback provider that enforces each model's real output limit and context window with the
 * provider's own error wording (test/fixtures/provider-errors), for Chat Completions, Responses
 * and Anthropic Messages. The limits here are written out independently of src/budget's table,
 * so a wrong table entry makes the adapter tests fail instead of agreeing with itself.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readBody } from './scripted-http-server.js';

export interface ServedModel {
  readonly contextWindow: number;
  readonly maxOutput: number;
  /** How the provider words an output cap above `maxOutput`. */
  readonly wording: 'openai' | 'anthropic' | 'deepseek';
  /** o-series: `max_tokens` is refused, `max_completion_tokens` required. */
  readonly reasoning?: boolean;
}

/** Published limits of the models the README snippets are checked against. */
export const SERVED_MODELS: Readonly<Record<string, ServedModel>> = {
  'gpt-4o': { contextWindow: 128_000, maxOutput: 16_384, wording: 'openai' },
  'gpt-4.1': { contextWindow: 1_047_576, maxOutput: 32_768, wording: 'openai' },
  o3: { contextWindow: 200_000, maxOutput: 100_000, wording: 'openai', reasoning: true },
  'o4-mini': { contextWindow: 200_000, maxOutput: 100_000, wording: 'openai', reasoning: true },
  'claude-sonnet-4-5': { contextWindow: 200_000, maxOutput: 64_000, wording: 'anthropic' },
  'claude-haiku-4-5': { contextWindow: 200_000, maxOutput: 64_000, wording: 'anthropic' },
  'claude-opus-4-1': { contextWindow: 200_000, maxOutput: 32_000, wording: 'anthropic' },
  'deepseek-chat': { contextWindow: 128_000, maxOutput: 8192, wording: 'deepseek' },
};

export interface LimitsRequest {
  readonly path: string;
  readonly body: Record<string, unknown>;
  readonly status: number;
  /** The error message sent back (status ≠ 200). */
  readonly error?: string;
}

export interface LimitsServer {
  readonly url: string;
  readonly requests: LimitsRequest[];
  close(): Promise<void>;
}

const num = (v: unknown): number | undefined => (typeof v === 'number' ? v : undefined);

/** A conservative prompt size: 1 token per 3 characters of the whole body. */
const promptTokens = (body: Record<string, unknown>): number => Math.ceil(JSON.stringify(body).length / 3);

type Reply = { status: number; json: unknown };

const openaiError = (message: string, param: string, code: string): Reply => ({
  status: 400,
  json: { error: { message, type: 'invalid_request_error', param, code } },
});

function check(path: string, body: Record<string, unknown>): Reply | undefined {
  const name = typeof body['model'] === 'string' ? body['model'] : '';
  const model = SERVED_MODELS[name];
  if (model === undefined)
    return {
      status: 404,
      json: {
        error: {
          message: `The model \`${name}\` does not exist or you do not have access to it.`,
          type: 'invalid_request_error',
          code: 'model_not_found',
        },
      },
    };
  const prompt = promptTokens(body);
  if (path.endsWith('/messages')) {
    const cap = num(body['max_tokens']);
    const anthropic = (message: string): Reply => ({
      status: 400,
      json: { type: 'error', error: { type: 'invalid_request_error', message } },
    });
    if (cap === undefined) return anthropic('max_tokens: Field required');
    if (cap > model.maxOutput)
      return anthropic(
        `max_tokens: ${cap} > ${model.maxOutput}, which is the maximum allowed number of output tokens for ${name}`,
      );
    if (prompt + cap > model.contextWindow)
      return anthropic(
        `input length and \`max_tokens\` exceed context limit: ${prompt} + ${cap} > ${model.contextWindow}, decrease input length or \`max_tokens\` and try again`,
      );
    return undefined;
  }
  if (model.reasoning === true && body['max_tokens'] !== undefined) {
    return openaiError(
      "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
      'max_tokens',
      'unsupported_parameter',
    );
  }
  const cap = num(body['max_output_tokens']) ?? num(body['max_completion_tokens']) ?? num(body['max_tokens']);
  if (cap === undefined) return undefined;
  if (cap > model.maxOutput) {
    if (model.wording === 'deepseek')
      return {
        status: 400,
        json: {
          error: {
            message: `Invalid max_tokens value, the valid range of max_tokens is [1, ${model.maxOutput}]`,
            type: 'invalid_request_error',
            param: null,
            code: 'invalid_request_error',
          },
        },
      };
    return openaiError(
      `max_tokens is too large: ${cap}. This model supports at most ${model.maxOutput} completion tokens, whereas you provided ${cap}.`,
      'max_tokens',
      'invalid_value',
    );
  }
  if (prompt + cap > model.contextWindow) {
    return openaiError(
      `This model's maximum context length is ${model.contextWindow} tokens. However, you requested ${prompt + cap} tokens (${prompt} in the messages, ${cap} in the completion). Please reduce the length of the messages or completion.`,
      'messages',
      'context_length_exceeded',
    );
  }
  return undefined;
}

function success(path: string, model: string): Reply {
  if (path.endsWith('/messages')) {
    return {
      status: 200,
      json: {
        id: 'msg_1',
        type: 'message',
        role: 'assistant',
        model,
        content: [{ type: 'text', text: 'done' }],
        stop_reason: 'end_turn',
        stop_sequence: null,
        usage: { input_tokens: 10, output_tokens: 1 },
      },
    };
  }
  if (path.endsWith('/responses')) {
    return {
      status: 200,
      json: {
        id: 'resp_1',
        object: 'response',
        created_at: 0,
        model,
        status: 'completed',
        output: [
          {
            type: 'message',
            id: 'msg_1',
            role: 'assistant',
            status: 'completed',
            content: [{ type: 'output_text', text: 'done', annotations: [] }],
          },
        ],
        usage: {
          input_tokens: 10,
          output_tokens: 1,
          total_tokens: 11,
          input_tokens_details: { cached_tokens: 0 },
          output_tokens_details: { reasoning_tokens: 0 },
        },
      },
    };
  }
  return {
    status: 200,
    json: {
      id: 'chatcmpl-1',
      object: 'chat.completion',
      created: 0,
      model,
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content: 'done', refusal: null },
          finish_reason: 'stop',
          logprobs: null,
        },
      ],
      usage: { prompt_tokens: 10, completion_tokens: 1, total_tokens: 11 },
    },
  };
}

/** Start the server on 127.0.0.1 (an ephemeral port). */
export async function startLimitsServer(): Promise<LimitsServer> {
  const requests: LimitsRequest[] = [];
  const server = createServer((req, res) => {
    void readBody(req).then(
      (body) => {
        const path = req.url ?? '';
        const failure = check(path, body);
        const reply = failure ?? success(path, typeof body['model'] === 'string' ? body['model'] : '');
        const json = reply.json as { error?: { message?: string } };
        requests.push({
          path,
          body,
          status: reply.status,
          ...(failure === undefined ? {} : { error: String(json.error?.message) }),
        });
        res.writeHead(reply.status, { 'content-type': 'application/json', 'request-id': `req_${requests.length}` });
        res.end(JSON.stringify(reply.json));
      },
      () => {
        res.writeHead(400).end();
      },
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The output cap a request carried, whichever field it used. */
export function sentCap(body: Record<string, unknown>): number | undefined {
  return num(body['max_output_tokens']) ?? num(body['max_completion_tokens']) ?? num(body['max_tokens']);
}
