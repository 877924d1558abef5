/**
 * A Model (or ModelProvider) wrapper that applies the pipeline's output cap as
 * `modelSettings.maxTokens` (Responses → `max_output_tokens`, Chat → `max_tokens`; a smaller cap
 * the caller already set always wins) and, when a request carries a receipt while the agent does
 * not offer `token_terminator`, offers it (as the last tool) and answers the model's calls to it
 * itself: the runner never sees a call to a tool the agent does not have. Streamed responses keep
 * streaming; a recovery round's closing event is replaced by the next round's events.
 */
import type { AgentInputItem, Model, ModelProvider, ModelRequest, ModelResponse, StreamEvent } from '@openai/agents';
import { carriesReceipt } from '../../src/recovery/formats.js';
import { answerRecoveryCall } from '../../src/recovery/loop.js';
import { RECOVERY_TOOL_NAME } from '../../src/recovery/schema.js';
import type { Terminator } from '../../src/runtime/types.js';
import { override } from '../shared/override.js';
import type { CapLedger } from './cap-ledger.js';
import { agentsParameters } from './recovery-tool.js';

/** What the wrapper needs to offer and answer the recovery tool. */
export interface ModelRecovery {
  readonly terminator: Terminator;
  /** Rounds answered per model call. Default: 3. */
  readonly rounds?: number;
}

type Item = Record<string, unknown>;

function capRequest(request: ModelRequest, cap: number | undefined): ModelRequest {
  try {
    if (cap === undefined) return request;
    const current = request.modelSettings.maxTokens;
    const maxTokens = typeof current === 'number' && current > 0 ? Math.min(current, cap) : cap;
    return maxTokens === current ? request : { ...request, modelSettings: { ...request.modelSettings, maxTokens } };
  } catch {
    return request;
  }
}

/** The request with the recovery tool offered, or undefined when it is not needed (or already there). */
function offerRecovery(request: ModelRequest, terminator: Terminator): ModelRequest | undefined {
  if (request.tools.some((t) => (t as { name?: string }).name === RECOVERY_TOOL_NAME)) return undefined;
  if (!carriesReceipt({ input: request.input, instructions: request.systemInstructions }, 'responses'))
    return undefined;
  const tool = {
    type: 'function',
    name: RECOVERY_TOOL_NAME,
    description: terminator.recoveryTool.description,
    parameters: agentsParameters(terminator),
    strict: false,
  };
  return { ...request, tools: [...request.tools, tool as unknown as ModelRequest['tools'][number]] };
}

/**
 * In pass-through mode (no usable vault) nothing was stored, so nothing can be recovered: the
 * recovery tool the agent lists (`tt.recoveryTool`) is left out of the request, and its cost with it.
 */
function withoutUselessRecovery(request: ModelRequest, recovery: ModelRecovery | undefined): ModelRequest {
  if (recovery?.terminator.passThrough !== true) return request;
  const tools = request.tools.filter((t) => (t as { name?: string }).name !== RECOVERY_TOOL_NAME);
  return tools.length === request.tools.length ? request : { ...request, tools };
}

const isRecoveryCall = (item: unknown): boolean =>
  (item as Item)?.['type'] === 'function_call' && (item as Item)['name'] === RECOVERY_TOOL_NAME;
const isCall = (item: unknown): boolean =>
  (item as Item)?.['type'] === 'function_call' || (item as Item)?.['type'] === 'hosted_tool_call';

/** One round: the items to continue with, or undefined when the output holds no recovery-only turn. */
async function answerRound(
  output: readonly unknown[],
  request: ModelRequest,
  recovery: ModelRecovery,
  sessionId: string,
): Promise<ModelRequest | undefined> {
  const calls = output.filter(isRecoveryCall) as Item[];
  if (calls.length === 0 || output.some((o) => isCall(o) && !isRecoveryCall(o))) return undefined;
  const results: Item[] = [];
  for (const call of calls) {
    const text = await answerRecoveryCall(recovery.terminator.recoveryTool, call['arguments'], sessionId);
    results.push({
      type: 'function_call_result',
      name: RECOVERY_TOOL_NAME,
      callId: call['callId'],
      status: 'completed',
      output: { type: 'text', text },
    });
  }
  const input: AgentInputItem[] =
    typeof request.input === 'string' ? [{ role: 'user', content: request.input }] : request.input;
  return {
    ...request,
    input: [...input, ...(output as AgentInputItem[]), ...(results as unknown as AgentInputItem[])],
  };
}

/** A response (or a stream's closing one) without the recovery calls the wrapper answered. */
const withoutRecovery = <R extends { readonly output: readonly unknown[] }>(response: R): R => ({
  ...response,
  output: response.output.filter((o) => !isRecoveryCall(o)),
});

/**
 * Wrap a Model; every other member of the model is forwarded unchanged.
 *
 * @example
 * const agent = new Agent({ name: 'coder', model: wrapModel(model, ledger) });
 */
export function wrapModel<M extends Model>(model: M, ledger: CapLedger, recovery?: ModelRecovery): M {
  const prepare = (request: ModelRequest) => {
    const taken = ledger.take(request.input);
    const capped = withoutUselessRecovery(capRequest(request, taken?.cap), recovery);
    const offered = recovery === undefined ? undefined : offerRecovery(capped, recovery.terminator);
    const sessionId = taken?.sessionId ?? 'openai-agents:model';
    /** The request of the round after `round`, or undefined when `output` ends the call. */
    const next = async (output: readonly unknown[], current: ModelRequest, round: number) =>
      recovery !== undefined && round < (recovery.rounds ?? 3)
        ? answerRound(output, current, recovery, sessionId)
        : undefined;
    return { request: offered ?? capped, offered: offered !== undefined, next };
  };
  const getResponse = async (request: ModelRequest): Promise<ModelResponse> => {
    const p = prepare(request);
    let current = p.request;
    for (let round = 0; ; round++) {
      const response = await model.getResponse(current);
      if (!p.offered) return response;
      const next = await p.next(response.output, current, round);
      if (next === undefined) return withoutRecovery(response);
      current = next;
    }
  };
  async function* getStreamedResponse(request: ModelRequest): AsyncIterable<StreamEvent> {
    const p = prepare(request);
    let current = p.request;
    for (let round = 0; ; round++) {
      let next: ModelRequest | undefined;
      for await (const event of model.getStreamedResponse(current)) {
        if (!p.offered || event.type !== 'response_done') {
          yield event;
          continue;
        }
        next = await p.next(event.response.output, current, round);
        if (next === undefined) yield { ...event, response: withoutRecovery(event.response) };
      }
      if (next === undefined) return;
      current = next;
    }
  }
  return override(override(model, 'getResponse', getResponse), 'getStreamedResponse', getStreamedResponse);
}

/**
 * Wrap a ModelProvider so every model it returns is wrapped.
 *
 * @example
 * const runner = new Runner({ modelProvider: wrapModelProvider(new OpenAIProvider(), ledger) });
 */
export function wrapModelProvider(provider: ModelProvider, ledger: CapLedger, recovery?: ModelRecovery): ModelProvider {
  return {
    getModel: async (name?: string) => wrapModel(await provider.getModel(name), ledger, recovery),
  };
}
