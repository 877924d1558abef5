/**
 * A hand-written Agents SDK Model that plays a script: each step sees the request's input items
 * and returns output items. Every call is logged (input items, `modelSettings.maxTokens`).
 */
import {
  Usage,
  type AgentInputItem,
  type Model,
  type ModelRequest,
  type ModelResponse,
  type StreamEvent,
} from '@openai/agents';

export interface AgentsCall {
  readonly input: readonly AgentInputItem[];
  readonly maxTokens: number | undefined;
  /** Names of the tools the request offered. */
  readonly tools: readonly string[];
}

export type AgentsStep = (
  input: readonly AgentInputItem[],
  signal: AbortSignal | undefined,
) => unknown[] | Promise<unknown[]>;

export const callTool = (callId: string, name: string, args: Record<string, unknown>) => [
  { type: 'function_call', callId, name, arguments: JSON.stringify(args), status: 'completed' },
];
export const say = (text: string) => [
  { type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text }] },
];

export class ScriptedAgentsModel implements Model {
  readonly log: AgentsCall[] = [];
  #i = 0;
  constructor(readonly script: AgentsStep[]) {}

  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    request.signal?.throwIfAborted();
    const input = typeof request.input === 'string' ? [] : request.input;
    this.log.push({
      input,
      maxTokens: request.modelSettings.maxTokens,
      tools: request.tools.map((t) => (t as { name?: string }).name ?? ''),
    });
    const step = this.script[this.#i++] ?? (() => say('done'));
    return { usage: new Usage(), output: (await step(input, request.signal)) as ModelResponse['output'] };
  }

  // eslint-disable-next-line require-yield
  async *getStreamedResponse(): AsyncIterable<StreamEvent> {
    throw new Error('streaming is not scripted');
  }
}

/** Wait until the signal aborts, then throw its reason (a model stuck in a long call). */
export function untilAborted(signal: AbortSignal | undefined): Promise<never> {
  return new Promise((_, reject) => {
    if (signal === undefined) return;
    if (signal.aborted) reject(signal.reason as Error);
    signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true });
  });
}
