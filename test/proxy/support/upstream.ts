/**
 * A loopback upstream for proxy tests: records every request (method, path, headers, exact body
 * bytes) and answers from a script: JSON, raw bytes, server-sent events, or a failure made with
 * the real socket (hang, reset before headers, reset in the middle of the body).
 */
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Recorded {
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
  /** The body parsed as JSON, when it is JSON. */
  readonly json: Record<string, unknown> | undefined;
}

export type Reply =
  | { readonly status?: number; readonly headers?: Record<string, string | string[]>; readonly json: unknown }
  | { readonly status?: number; readonly headers?: Record<string, string | string[]>; readonly raw: Buffer | string }
  | { readonly status?: number; readonly sse: readonly string[] }
  | 'hang'
  | 'reset'
  | 'reset-mid';

export type Script = (request: Recorded, index: number) => Reply;

export interface Upstream {
  readonly url: string;
  readonly requests: Recorded[];
  /** Resolves when a hung request's connection was closed by the other side. */
  readonly dropped: Promise<void>;
  close(): Promise<void>;
}

function send(res: ServerResponse, reply: Exclude<Reply, 'hang' | 'reset' | 'reset-mid'>): void {
  if ('json' in reply) {
    const text = JSON.stringify(reply.json);
    res.writeHead(reply.status ?? 200, { 'content-type': 'application/json', ...reply.headers });
    res.end(text);
  } else if ('raw' in reply) {
    res.writeHead(reply.status ?? 200, { ...reply.headers });
    res.end(reply.raw);
  } else {
    res.writeHead(reply.status ?? 200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    for (const event of reply.sse) res.write(`${event}\n\n`);
    res.end();
  }
}

export async function startUpstream(script: Script): Promise<Upstream> {
  const requests: Recorded[] = [];
  let markDropped: () => void = () => undefined;
  const dropped = new Promise<void>((resolve) => (markDropped = resolve));
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      let json: Record<string, unknown> | undefined;
      try {
        json = body.length > 0 ? (JSON.parse(body.toString('utf8')) as Record<string, unknown>) : undefined;
      } catch {
        json = undefined;
      }
      const recorded: Recorded = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body, json };
      requests.push(recorded);
      const reply = script(recorded, requests.length - 1);
      if (reply === 'hang') {
        res.on('close', () => markDropped());
        return;
      }
      if (reply === 'reset') {
        req.socket.resetAndDestroy();
        return;
      }
      if (reply === 'reset-mid') {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('data: {"partial":true}\n\n', () => setImmediate(() => req.socket.resetAndDestroy()));
        return;
      }
      send(res, reply);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    dropped,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

// ---------------------------------------------------------------------------------------------
// Scripted model answers in the three wire formats, whole and streamed.

const data = (value: unknown): string => `data: ${JSON.stringify(value)}`;
const named = (type: string, value: Record<string, unknown>): string =>
  `event: ${type}\ndata: ${JSON.stringify({ type, ...value })}`;

export type ToolCallSpec = { readonly id: string; readonly name: string; readonly args: Record<string, unknown> };

/** One Chat Completions stream chunk carrying `delta`, with `finish` as its finish reason. */
const chatChunk = (delta: unknown, finish: string | null = null): string =>
  data({
    id: 'cc-s',
    object: 'chat.completion.chunk',
    created: 0,
    model: 'scripted',
    choices: [{ index: 0, delta, finish_reason: finish }],
  });

export const chat = {
  text: (content: string): Reply => ({
    json: {
      id: 'cc-1',
      object: 'chat.completion',
      created: 0,
      model: 'scripted',
      choices: [{ index: 0, message: { role: 'assistant', content, refusal: null }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
    },
  }),
  calls: (calls: readonly ToolCallSpec[], content: string | null = null): Reply => ({
    json: {
      id: 'cc-2',
      object: 'chat.completion',
      created: 0,
      model: 'scripted',
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content,
            tool_calls: calls.map((c) => ({
              id: c.id,
              type: 'function',
              function: { name: c.name, arguments: JSON.stringify(c.args) },
            })),
          },
          finish_reason: 'tool_calls',
        },
      ],
      usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
    },
  }),
  streamText: (parts: readonly string[]): Reply => ({
    sse: [
      chatChunk({ role: 'assistant', content: '' }),
      ...parts.map((p) => chatChunk({ content: p })),
      chatChunk({}, 'stop'),
      'data: [DONE]',
    ],
  }),
  streamCalls: (calls: readonly ToolCallSpec[], content?: string): Reply => {
    const events = [chatChunk({ role: 'assistant', content: content ?? null })];
    calls.forEach((c, index) => {
      const args = JSON.stringify(c.args);
      const half = Math.floor(args.length / 2);
      events.push(
        chatChunk({ tool_calls: [{ index, id: c.id, type: 'function', function: { name: c.name, arguments: '' } }] }),
      );
      events.push(chatChunk({ tool_calls: [{ index, function: { arguments: args.slice(0, half) } }] }));
      events.push(chatChunk({ tool_calls: [{ index, function: { arguments: args.slice(half) } }] }));
    });
    events.push(chatChunk({}, 'tool_calls'), 'data: [DONE]');
    return { sse: events };
  },
};

export const anthropic = {
  text: (text: string): Reply => ({
    json: {
      id: 'msg-1',
      type: 'message',
      role: 'assistant',
      model: 'scripted',
      content: [{ type: 'text', text }],
      stop_reason: 'end_turn',
      stop_sequence: null,
      usage: { input_tokens: 1, output_tokens: 1 },
    },
  }),
  calls: (calls: readonly ToolCallSpec[], text?: string): Reply => ({
    json: {
      id: 'msg-2',
      type: 'message',
      role: 'assistant',
      model: 'scripted',
      content: [
        ...(text === undefined ? [] : [{ type: 'text', text }]),
        ...calls.map((c) => ({ type: 'tool_use', id: c.id, name: c.name, input: c.args })),
      ],
      stop_reason: 'tool_use',
      stop_sequence: null,
      usage: { input_tokens: 1, output_tokens: 1 },
    },
  }),
  stream: (blocks: readonly ({ readonly text: string } | ToolCallSpec)[]): Reply => {
    const events = [
      named('message_start', {
        message: {
          id: 'msg-s',
          type: 'message',
          role: 'assistant',
          model: 'scripted',
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: { input_tokens: 1, output_tokens: 1 },
        },
      }),
      named('ping', {}),
    ];
    let tool = false;
    blocks.forEach((b, index) => {
      if ('text' in b) {
        events.push(named('content_block_start', { index, content_block: { type: 'text', text: '' } }));
        for (const piece of b.text.split(/(?<= )/))
          events.push(named('content_block_delta', { index, delta: { type: 'text_delta', text: piece } }));
      } else {
        tool = true;
        const args = JSON.stringify(b.args);
        events.push(
          named('content_block_start', {
            index,
            content_block: { type: 'tool_use', id: b.id, name: b.name, input: {} },
          }),
        );
        events.push(
          named('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: args.slice(0, 5) } }),
        );
        events.push(
          named('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: args.slice(5) } }),
        );
      }
      events.push(named('content_block_stop', { index }));
    });
    events.push(
      named('message_delta', {
        delta: { stop_reason: tool ? 'tool_use' : 'end_turn', stop_sequence: null },
        usage: { output_tokens: 3 },
      }),
      named('message_stop', {}),
    );
    return { sse: events };
  },
};

function responsesItems(blocks: readonly ({ readonly text: string } | ToolCallSpec)[]): Record<string, unknown>[] {
  return blocks.map((b, i) =>
    'text' in b
      ? {
          id: `msg_${i}`,
          type: 'message',
          status: 'completed',
          role: 'assistant',
          content: [{ type: 'output_text', text: b.text, annotations: [] }],
        }
      : {
          id: `fc_${i}`,
          type: 'function_call',
          status: 'completed',
          call_id: b.id,
          name: b.name,
          arguments: JSON.stringify(b.args),
        },
  );
}

export const responses = {
  reply: (blocks: readonly ({ readonly text: string } | ToolCallSpec)[], id = 'resp-1'): Reply => ({
    json: {
      id,
      object: 'response',
      created_at: 0,
      model: 'scripted',
      status: 'completed',
      output: responsesItems(blocks),
      usage: { input_tokens: 1, output_tokens: 1, total_tokens: 2 },
    },
  }),
  stream: (blocks: readonly ({ readonly text: string } | ToolCallSpec)[], id = 'resp-s'): Reply => {
    let seq = 0;
    const ev = (type: string, value: Record<string, unknown>): string =>
      named(type, { ...value, sequence_number: seq++ });
    const base = { id, object: 'response', created_at: 0, model: 'scripted' };
    const items = responsesItems(blocks);
    const events = [
      ev('response.created', { response: { ...base, status: 'in_progress', output: [] } }),
      ev('response.in_progress', { response: { ...base, status: 'in_progress', output: [] } }),
    ];
    items.forEach((item, output_index) => {
      if (item['type'] === 'message') {
        const text = (item['content'] as { text: string }[])[0]!.text;
        events.push(
          ev('response.output_item.added', { output_index, item: { ...item, status: 'in_progress', content: [] } }),
        );
        events.push(
          ev('response.content_part.added', {
            item_id: item['id'],
            output_index,
            content_index: 0,
            part: { type: 'output_text', text: '', annotations: [] },
          }),
        );
        for (const piece of text.split(/(?<= )/))
          events.push(
            ev('response.output_text.delta', {
              item_id: item['id'],
              output_index,
              content_index: 0,
              delta: piece,
              logprobs: [],
            }),
          );
        events.push(
          ev('response.output_text.done', { item_id: item['id'], output_index, content_index: 0, text, logprobs: [] }),
        );
        events.push(
          ev('response.content_part.done', {
            item_id: item['id'],
            output_index,
            content_index: 0,
            part: { type: 'output_text', text, annotations: [] },
          }),
        );
      } else {
        events.push(
          ev('response.output_item.added', { output_index, item: { ...item, status: 'in_progress', arguments: '' } }),
        );
        events.push(
          ev('response.function_call_arguments.delta', { item_id: item['id'], output_index, delta: item['arguments'] }),
        );
        events.push(
          ev('response.function_call_arguments.done', {
            item_id: item['id'],
            output_index,
            arguments: item['arguments'],
          }),
        );
      }
      events.push(ev('response.output_item.done', { output_index, item }));
    });
    events.push(
      ev('response.completed', {
        response: {
          ...base,
          status: 'completed',
          output: items,
          usage: { input_tokens: 1, output_tokens: 1, total_tokens: 2 },
        },
      }),
    );
    return { sse: events };
  },
};
