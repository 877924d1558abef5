/**
 * A loopback HTTP server that plays a scripted provider for the real `openai` and
 * `@anthropic-ai/sdk` clients. Each request body is recorded; each reply comes from the script
 * (JSON with a status, or `hang`: never answer, and note when the client drops the connection).
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export type Reply = { status?: number; json: unknown } | 'hang';
export type ServerStep = (body: Record<string, unknown>, path: string) => Reply;

export interface ScriptedServer {
  readonly url: string;
  readonly requests: { path: string; body: Record<string, unknown> }[];
  /** Requests whose connection the client closed before an answer. */
  readonly dropped: number;
  close(): Promise<void>;
}

/** A request's JSON body (`{}` when it is empty). */
export async function readBody(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  return text === '' ? {} : (JSON.parse(text) as Record<string, unknown>);
}

export async function startScriptedServer(script: ServerStep[]): Promise<ScriptedServer> {
  const requests: ScriptedServer['requests'] = [];
  let dropped = 0;
  let index = 0;
  const server: Server = createServer((req, res) => {
    void readBody(req).then((body) => {
      const path = req.url ?? '';
      requests.push({ path, body });
      const step = script[index++];
      const reply =
        step === undefined ? { status: 500, json: { error: { message: 'script exhausted' } } } : step(body, path);
      if (reply === 'hang') {
        res.on('close', () => {
          if (!res.writableEnded) dropped += 1;
        });
        return;
      }
      res.writeHead(reply.status ?? 200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(reply.json));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    get dropped() {
      return dropped;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export const chatReply = (message: Record<string, unknown>, finish = 'stop'): Reply => ({
  json: {
    id: 'cc-1',
    object: 'chat.completion',
    created: 0,
    model: 'scripted',
    choices: [{ index: 0, message: { role: 'assistant', content: null, ...message }, finish_reason: finish }],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  },
});

export const chatToolCall = (id: string, name: string, args: Record<string, unknown>): Reply =>
  chatReply(
    { tool_calls: [{ id, type: 'function', function: { name, arguments: JSON.stringify(args) } }] },
    'tool_calls',
  );

export const responsesReply = (output: unknown[]): Reply => ({
  json: {
    id: 'resp-1',
    object: 'response',
    created_at: 0,
    model: 'scripted',
    status: 'completed',
    output,
    usage: { input_tokens: 1, output_tokens: 1, total_tokens: 2 },
  },
});

export const anthropicReply = (content: unknown[], stop = 'end_turn'): Reply => ({
  json: {
    id: 'msg-1',
    type: 'message',
    role: 'assistant',
    model: 'scripted',
    content,
    stop_reason: stop,
    stop_sequence: null,
    usage: { input_tokens: 1, output_tokens: 1 },
  },
});

export const errorReply = (status: number, message: string): Reply => ({
  status,
  json: { error: { message, type: 'invalid_request_error' } },
});
