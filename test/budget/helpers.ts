import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { firstValueFrom, from } from 'rxjs';
import { capOutputBudget, type CapOutputBudgetOptions } from '../../operators/cap-output-budget.js';
import { createStep, type ProviderRequest, type Route, type Step } from '../../src/step.js';

/** Freeze a value and everything reachable from it (caller objects must never be mutated). */
export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value as Record<string, unknown>)) deepFreeze(v);
  }
  return value;
}

export type TokenizeMode = 'ok' | 'status500' | 'hang' | 'garbage' | 'wrongLength' | 'negative';

export interface ReceivedRequest {
  readonly path: string;
  readonly headers: IncomingMessage['headers'];
  readonly body: Record<string, unknown>;
}

/**
 * A real HTTP server on 127.0.0.1 implementing vLLM's /tokenize contract:
 * POST {…chat payload} → {count, max_model_len, tokens}. `mode` picks the behaviour.
 */
export class TokenizeServer {
  mode: TokenizeMode = 'ok';
  count = 1000;
  maxModelLen = 32_768;
  readonly received: ReceivedRequest[] = [];
  /** Resolves each time a request socket closes while the server was still holding the request. */
  closedWhileHanging = 0;
  #server: Server;
  #hanging = new Set<ServerResponse>();
  #arrivals: Array<() => void> = [];

  constructor() {
    this.#server = createServer((req, res) => void this.#handle(req, res));
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}/tokenize`;
  }

  /** Resolves when the next request has arrived. */
  nextArrival(): Promise<void> {
    return new Promise((resolve) => this.#arrivals.push(resolve));
  }

  async close(): Promise<void> {
    for (const res of this.#hanging) res.destroy();
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    let body: Record<string, unknown> = {};
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
    } catch {
      // recorded as {}
    }
    this.received.push({ path: req.url ?? '', headers: req.headers, body });
    for (const arrived of this.#arrivals.splice(0)) arrived();
    const json = (status: number, value: unknown): void => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(value));
    };
    switch (this.mode) {
      case 'ok':
        return json(200, { count: this.count, max_model_len: this.maxModelLen, tokens: [] });
      case 'negative':
        return json(200, { count: -1, max_model_len: this.maxModelLen, tokens: [] });
      case 'wrongLength':
        return json(200, { count: this.count, max_model_len: this.maxModelLen * 2, tokens: [] });
      case 'status500':
        return json(500, { error: 'boom' });
      case 'garbage':
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"count": 12, "max_model_len"');
        return;
      case 'hang':
        this.#hanging.add(res);
        res.on('close', () => {
          if (this.#hanging.delete(res)) this.closedWhileHanging++;
        });
        return;
    }
  }
}

/** A URL on 127.0.0.1 where nothing listens (a port that was just closed). */
export async function closedPortUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}/tokenize`;
}

/** One request of session `s` (with `route`, when given) through `capOutputBudget(options)`: the step it emits. */
export async function runCap(
  options: CapOutputBudgetOptions,
  request: ProviderRequest,
  route?: Route,
): Promise<Step<ProviderRequest>> {
  const step = createStep(request, { sessionId: 's', ...(route !== undefined && { route }) });
  return firstValueFrom(from([step]).pipe(capOutputBudget(options)));
}
