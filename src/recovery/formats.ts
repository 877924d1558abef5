/**
 * The recovery tool on the three wire formats, as plain JSON (no SDK, no I/O): its definition, the
 * model's calls to it, and the items that record one answered round (the "exchange").
 */
import { referencedArtifacts } from '../receipts/index.js';
import type { RecoveryTool } from '../runtime/types.js';
import { isObj, toolName } from '../model/read.js';
import type { ProviderRequest } from '../step.js';
import { RECOVERY_TOOL_NAME } from './schema.js';

export type RecoveryWireFormat = 'chat' | 'responses' | 'anthropic';

/** One call of the model to the recovery tool. */
export interface RecoveryCall {
  /** The call id the answer must name (chat `tool_call_id`, Responses `call_id`, Anthropic `tool_use_id`). */
  readonly id: string;
  /** The arguments as the model sent them (a JSON string, or an object on Anthropic). */
  readonly arguments: unknown;
}

export type Obj = Record<string, unknown>;

/** The argument schema without `additionalProperties: false`, so a spoofed key is dropped rather than rejected. */
export function lenientParameters(tool: Pick<RecoveryTool, 'parameters'>): Record<string, unknown> {
  const { additionalProperties: _ignored, ...rest } = tool.parameters as Record<string, unknown>;
  return rest;
}

/** The tool definition for one wire format (plain JSON). */
export function recoveryToolJson(
  tool: Pick<RecoveryTool, 'name' | 'description' | 'parameters'>,
  format: RecoveryWireFormat,
): Obj {
  const parameters = lenientParameters(tool);
  switch (format) {
    case 'chat':
      return { type: 'function', function: { name: tool.name, description: tool.description, parameters } };
    case 'responses':
      return { type: 'function', name: tool.name, description: tool.description, parameters, strict: false };
    case 'anthropic':
      return { name: tool.name, description: tool.description, input_schema: parameters };
  }
}

/** True when the request's tools already offer a tool with the recovery tool's name. */
export function offersRecoveryTool(request: ProviderRequest): boolean {
  const tools = request['tools'];
  return Array.isArray(tools) && tools.some((t) => toolName(t) === RECOVERY_TOOL_NAME);
}

/**
 * The request with the recovery tool appended as the LAST tool (a stable position: the caller's
 * tools keep their order and bytes, so the cached prefix up to them survives). Returns the request
 * itself when it already offers the tool.
 */
export function withRecoveryTool(
  request: ProviderRequest,
  format: RecoveryWireFormat,
  tool: Pick<RecoveryTool, 'name' | 'description' | 'parameters'>,
): ProviderRequest {
  if (offersRecoveryTool(request)) return request;
  const tools = Array.isArray(request['tools']) ? (request['tools'] as unknown[]) : [];
  return { ...request, tools: [...tools, recoveryToolJson(tool, format)] };
}

interface CallSplit {
  readonly recovery: RecoveryCall[];
  /** Calls to any other tool (the client's own). */
  readonly others: number;
}

/** The first choice's message of a Chat Completions response. */
function chatMessage(response: unknown): Obj | undefined {
  if (!isObj(response) || !Array.isArray(response['choices'])) return undefined;
  const choice = response['choices'][0];
  return isObj(choice) && isObj(choice['message']) ? choice['message'] : undefined;
}

const isRecoveryName = (name: unknown): boolean => name === RECOVERY_TOOL_NAME;

/** How a format's turn holds its tool calls. */
interface CallShape {
  /** The entries the calls are among: Chat's tool calls, Responses' output items, Anthropic's content blocks. */
  entries(response: unknown): unknown;
  /** The entry calls a tool (every Chat tool call does). */
  isCall(entry: unknown): boolean;
  /** The entry calls the recovery tool. */
  isRecovery(entry: unknown): entry is Obj;
  /** The key of a call's id. */
  readonly id: 'id' | 'call_id';
  args(call: Obj): unknown;
}

const SHAPES: Record<RecoveryWireFormat, CallShape> = {
  chat: {
    entries: (response) => chatMessage(response)?.['tool_calls'],
    isCall: () => true,
    isRecovery: (c): c is Obj => isObj(c) && isObj(c['function']) && isRecoveryName(c['function']['name']),
    id: 'id',
    args: (c) => (c['function'] as Obj)['arguments'],
  },
  responses: {
    entries: (response) => (isObj(response) ? response['output'] : undefined),
    isCall: (e) => isObj(e) && (e['type'] === 'function_call' || e['type'] === 'custom_tool_call'),
    isRecovery: (e): e is Obj => isObj(e) && e['type'] === 'function_call' && isRecoveryName(e['name']),
    id: 'call_id',
    args: (e) => e['arguments'],
  },
  anthropic: {
    entries: (response) => (isObj(response) ? response['content'] : undefined),
    isCall: (b) => isObj(b) && b['type'] === 'tool_use',
    isRecovery: (b): b is Obj => isObj(b) && b['type'] === 'tool_use' && isRecoveryName(b['name']),
    id: 'id',
    args: (b) => b['input'],
  },
};

/** True when `entry` (a Chat tool call, Responses output item or Anthropic content block) calls the recovery tool. */
export const isRecoveryCall = (entry: unknown, format: RecoveryWireFormat): entry is Obj =>
  SHAPES[format].isRecovery(entry);

/** Split a complete (non-streamed) response's tool calls into recovery calls and others. */
export function splitCalls(response: unknown, format: RecoveryWireFormat): CallSplit {
  const shape = SHAPES[format];
  const recovery: RecoveryCall[] = [];
  let others = 0;
  const entries = shape.entries(response);
  for (const e of Array.isArray(entries) ? entries : []) {
    if (!shape.isCall(e)) continue;
    if (shape.isRecovery(e) && typeof e[shape.id] === 'string')
      recovery.push({ id: e[shape.id] as string, arguments: shape.args(e) });
    else others++;
  }
  return { recovery, others };
}

/** The turn called the recovery tool and no tool of the client's. */
export const recoveryOnly = (split: CallSplit): boolean => split.recovery.length > 0 && split.others === 0;

/**
 * The response without its recovery calls (what the client may see). When nothing else is left
 * that asks for a tool, the stop reason says the turn ended (`stop`, `end_turn`). `dropText`: the
 * round was the recovery's only (no call of the client's), so the text the model wrote beside its
 * calls goes too.
 */
export function stripRecoveryCalls(response: unknown, format: RecoveryWireFormat, dropText = false): unknown {
  if (!isObj(response)) return response;
  const { others } = splitCalls(response, format);
  if (format === 'chat') {
    const choices = Array.isArray(response['choices']) ? response['choices'] : [];
    const first = choices[0];
    if (!isObj(first) || !isObj(first['message'])) return response;
    const message = first['message'];
    const kept = (Array.isArray(message['tool_calls']) ? message['tool_calls'] : []).filter(
      (c) => !isRecoveryCall(c, 'chat'),
    );
    const { tool_calls: _dropped, ...rest }: Obj = message;
    if (dropText && typeof rest['content'] === 'string') rest['content'] = '';
    const nextMessage = kept.length > 0 ? { ...rest, tool_calls: kept } : rest;
    const finish =
      others > 0 ? first['finish_reason'] : first['finish_reason'] === 'tool_calls' ? 'stop' : first['finish_reason'];
    return { ...response, choices: [{ ...first, message: nextMessage, finish_reason: finish }, ...choices.slice(1)] };
  }
  const key = format === 'responses' ? 'output' : 'content';
  const text = format === 'responses' ? 'message' : 'text';
  const kept = (Array.isArray(response[key]) ? response[key] : []).filter(
    (e) => !isRecoveryCall(e, format) && !(dropText && isObj(e) && e['type'] === text),
  );
  if (format === 'responses') return { ...response, output: kept };
  const stop = others === 0 && response['stop_reason'] === 'tool_use' ? 'end_turn' : response['stop_reason'];
  return { ...response, content: kept, stop_reason: stop };
}

/**
 * The conversation items that record one answered round: the model's turn reduced to what it
 * said plus its recovery calls (calls to the client's own tools are left out: the client never
 * ran them in this round), then one result per recovery call.
 */
export function exchangeItems(
  response: unknown,
  format: RecoveryWireFormat,
  answers: ReadonlyMap<string, string>,
): unknown[] {
  if (!isObj(response)) return [];
  const shape = SHAPES[format];
  const entries = shape.entries(response);
  const answer = (call: Obj): string | undefined => answers.get(String(call[shape.id]));
  if (format === 'chat') {
    const message = chatMessage(response);
    if (message === undefined) return [];
    const calls = (Array.isArray(entries) ? entries : []).filter(
      (c): c is Obj => isRecoveryCall(c, 'chat') && answer(c) !== undefined,
    );
    const { tool_calls: _all, ...rest } = message;
    const assistant = { ...rest, role: 'assistant', content: message['content'] ?? null, tool_calls: calls };
    return [assistant, ...calls.map((c) => ({ role: 'tool', tool_call_id: c['id'], content: answer(c) }))];
  }
  // Responses output items, Anthropic content blocks: every entry but the calls of the client's, then the results.
  const kept = (Array.isArray(entries) ? entries : []).filter(
    (e): e is Obj => isObj(e) && (!shape.isCall(e) || (isRecoveryName(e['name']) && answer(e) !== undefined)),
  );
  const calls = kept.filter((e) => isRecoveryCall(e, format));
  if (format === 'responses')
    return [...kept, ...calls.map((c) => ({ type: 'function_call_output', call_id: c['call_id'], output: answer(c) }))];
  const results = calls.map((b) => ({ type: 'tool_result', tool_use_id: b['id'], content: answer(b) }));
  return [
    { role: 'assistant', content: kept },
    { role: 'user', content: results },
  ];
}

/** The key of a request's conversation list for a format. */
export function listKey(format: RecoveryWireFormat): 'messages' | 'input' {
  return format === 'responses' ? 'input' : 'messages';
}

/** The conversation items of a request (a Responses string input reads as one user message). */
export function conversationItems(request: ProviderRequest, format: RecoveryWireFormat): readonly unknown[] {
  const list = request[listKey(format)];
  if (Array.isArray(list)) return list;
  if (format === 'responses' && typeof list === 'string') return [{ role: 'user', content: list }];
  return [];
}

/** True when the upstream keeps the conversation (Responses `previous_response_id` / `conversation`). */
export function serverSideState(request: ProviderRequest, format: RecoveryWireFormat): boolean {
  return (
    format === 'responses' &&
    (typeof request['previous_response_id'] === 'string' || request['conversation'] !== undefined)
  );
}

/**
 * The request that continues after one answered round: the exchange appended to the conversation,
 * or, when the upstream keeps the conversation, only the results chained to the round's response.
 */
export function continueRequest(
  request: ProviderRequest,
  format: RecoveryWireFormat,
  response: unknown,
  exchange: readonly unknown[],
): ProviderRequest {
  if (serverSideState(request, format)) {
    const outputs = exchange.filter((item) => isObj(item) && item['type'] === 'function_call_output');
    const id = isObj(response) ? response['id'] : undefined;
    return typeof request['previous_response_id'] === 'string' && typeof id === 'string'
      ? { ...request, previous_response_id: id, input: outputs }
      : { ...request, input: outputs };
  }
  return { ...request, [listKey(format)]: [...conversationItems(request, format), ...exchange] };
}

function anyReceipt(value: unknown): boolean {
  if (typeof value === 'string') return referencedArtifacts(value).length > 0;
  if (Array.isArray(value)) return value.some(anyReceipt);
  if (isObj(value)) return Object.values(value).some(anyReceipt);
  return false;
}

/** True when the request's conversation (or its instructions) names a Token Terminator artifact. */
export function carriesReceipt(request: ProviderRequest, format: RecoveryWireFormat): boolean {
  return anyReceipt(request[listKey(format)]) || anyReceipt(request['system']) || anyReceipt(request['instructions']);
}

/**
 * Two usage objects of any format added up: numbers summed, nested objects recursed, anything
 * else from `b`. Undefined when neither is an object.
 */
export function sumUsage(a: unknown, b: unknown): Obj | undefined {
  if (!isObj(a)) return isObj(b) ? b : undefined;
  if (!isObj(b)) return a;
  const out: Obj = { ...a };
  for (const [key, value] of Object.entries(b)) {
    const mine = out[key];
    if (typeof value === 'number' && typeof mine === 'number') out[key] = mine + value;
    else if (isObj(value) && isObj(mine)) out[key] = sumUsage(mine, value);
    else if (value !== null && value !== undefined) out[key] = value;
  }
  return out;
}

/** The usage a response body reports (Chat, Responses and Anthropic all call it `usage`). */
export function usageOf(body: unknown): Obj | undefined {
  return isObj(body) && isObj(body['usage']) ? body['usage'] : undefined;
}

/** `body` reporting `usage` (every round's, added up) instead of its own. */
export function withUsage(body: unknown, usage: Obj | undefined): unknown {
  return usage === undefined || !isObj(body) ? body : { ...body, usage };
}

/**
 * A copy without `cache_control` keys at any depth (the caller's objects are not touched): clients
 * move prompt-cache markers from request to request while the conversation stays the same. With
 * `plainText`, a content list of one plain text part is also read as that text (Claude Code sends
 * an opening message as `[{ type: 'text', text, cache_control }]` once and as the string `text` in
 * every later request).
 *
 * @example
 * withoutCacheMarkers({ content: [{ type: 'text', text: 'hi', cache_control: {} }] }, { plainText: true }); // { content: 'hi' }
 */
export function withoutCacheMarkers(value: unknown, options: { readonly plainText?: boolean } = {}): unknown {
  const strip = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(strip);
    if (v === null || typeof v !== 'object') return v;
    const out: Record<string, unknown> = {};
    for (const [key, inner] of Object.entries(v)) {
      if (key === 'cache_control') continue;
      out[key] = key === 'content' && options.plainText === true ? plainText(strip(inner)) : strip(inner);
    }
    return out;
  };
  return strip(value);
}

/** A content list of one `{ type: 'text', text }` part as its text; anything else as it is. */
function plainText(content: unknown): unknown {
  if (!Array.isArray(content) || content.length !== 1) return content;
  const part = content[0] as Record<string, unknown> | null;
  if (part === null || typeof part !== 'object' || part['type'] !== 'text' || typeof part['text'] !== 'string')
    return content;
  return Object.keys(part).length === 2 ? part['text'] : content;
}
