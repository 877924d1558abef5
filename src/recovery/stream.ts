/**
 * The recovery loop over server-sent events, one round at a time: events are passed on as they
 * arrive, except those of a `token_terminator` call, which the client never sees. When a round
 * ends with recovery calls only and rounds are left, its closing events are held back; the driver
 * answers the calls and streams the next round into the same client stream. Indices the client
 * uses to assemble its answer (Chat tool-call `index`, Responses `output_index` and
 * `sequence_number`, Anthropic content-block `index`) are renumbered so the spliced stream reads
 * as one answer; Responses' closing event carries every item the client saw. Text is held until
 * the round shows whose it is ({@link HeldText}); usage, id and the assistant role read as one
 * answer's ({@link StreamState}).
 *
 * Pure data in, text out: no I/O, so every format is tested with recorded event sequences.
 */
import { isObj } from '../model/read.js';
import {
  isRecoveryCall,
  recoveryOnly,
  splitCalls,
  stripRecoveryCalls,
  sumUsage,
  usageOf,
  type Obj,
  type RecoveryCall,
  type RecoveryWireFormat,
} from './formats.js';

/** One parsed event; `raw` is its text without the blank line that ended it. */
export interface SseEvent {
  readonly raw: string;
  readonly event?: string;
  readonly data: string;
}

/** Incremental SSE parser: feed text, get complete events. */
export class SseParser {
  #buffer = '';

  feed(text: string): SseEvent[] {
    this.#buffer += text;
    const out: SseEvent[] = [];
    for (;;) {
      const m = /\r\n\r\n|\n\n|\r\r/.exec(this.#buffer);
      if (m === null) break;
      const raw = this.#buffer.slice(0, m.index);
      this.#buffer = this.#buffer.slice(m.index + m[0].length);
      if (raw !== '') out.push(parseBlock(raw));
    }
    return out;
  }

  /** What is left when the stream ends (an event without its closing blank line). */
  end(): SseEvent[] {
    const rest = this.#buffer;
    this.#buffer = '';
    return rest.trim() === '' ? [] : [parseBlock(rest)];
  }
}

function parseBlock(raw: string): SseEvent {
  let event: string | undefined;
  const data: string[] = [];
  for (const line of raw.split(/\r\n|\n|\r/)) {
    if (line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
  }
  return event === undefined ? { raw, data: data.join('\n') } : { raw, event, data: data.join('\n') };
}

/** State that spans the rounds of one client stream. */
export interface StreamState {
  round: number;
  /** Next index the client sees (Responses output items, Anthropic content blocks). */
  nextVisible: number;
  /** Next Responses sequence number the client sees. */
  sequence: number;
  /** Responses: output items the client saw in earlier rounds. */
  readonly visibleItems: unknown[];
  /** Usage of the rounds held so far, added up: the round the client gets reports it plus its own. */
  usage: Record<string, unknown> | undefined;
  /** The id the client was given first (Chat chunk id, Responses response id): every round answers under it. */
  id: string | undefined;
  /** Chat: the assistant role delta was passed on (a later round's is left out). */
  roleSent: boolean;
}

export function createStreamState(): StreamState {
  return { round: 0, nextVisible: 0, sequence: 0, visibleItems: [], usage: undefined, id: undefined, roleSent: false };
}

/** How a round ended. */
export interface RoundEnd {
  /** The round's response rebuilt from its events (for the exchange), when it completed. */
  readonly body: unknown;
  readonly recovery: readonly RecoveryCall[];
  readonly others: number;
  /** True when the round held its closing events back to continue with another round. */
  readonly holding: boolean;
  /** The held closing events (send them if the next round cannot start after all). */
  readonly held: string;
}

export interface StreamRound {
  /** Text to send to the client now for this event ('' when nothing). */
  push(event: SseEvent): string;
  finish(): RoundEnd;
}

const block = (raw: string): string => `${raw}\n\n`;

function parseJson(data: string): Obj | undefined {
  try {
    const v: unknown = JSON.parse(data);
    return isObj(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

/** An event passed on with changed data. */
const emit = (type: string, json: Obj): string => block(`event: ${type}\ndata: ${JSON.stringify(json)}`);
/** A Chat chunk (data only) passed on with changed data. */
const chunk = (json: Obj): string => block(`data: ${JSON.stringify(json)}`);

/** A format's answer to the event that ends a recovery-only round it may continue: hold it and the rest back. */
const HOLD = Symbol('hold');

/**
 * One format's side of a round: `push` answers an event, given its data parsed and its type (or HOLD);
 * `finish` (did it hold?) rebuilds its response.
 */
interface RoundFormat {
  push(event: SseEvent, json: Obj | undefined, type: string): string | typeof HOLD;
  /** Told of each event held after HOLD (to read its usage). */
  observe?(json: Obj | undefined): void;
  finish(holding: boolean): unknown;
}

/**
 * One round of a client stream. `canContinue` says whether a recovery-only round may hold its end
 * for another round; when not, the end is passed on with the stop reason of a finished turn. Once
 * the format said HOLD, every event is kept back, raw, for the driver to send or drop, and the
 * round's held text is dropped (Chat still passes on what else its chunks said).
 */
export function createStreamRound(wire: RecoveryWireFormat, state: StreamState, canContinue: boolean): StreamRound {
  const rounds = { chat: chatRound, responses: responsesRound, anthropic: anthropicRound };
  const text = new HeldText();
  const format = rounds[wire](state, canContinue, text);
  let holding = false;
  let held = '';
  return {
    push(event) {
      const json = parseJson(event.data);
      if (!holding) {
        const out = format.push(event, json, String(json?.['type'] ?? event.event ?? ''));
        if (out !== HOLD) return out;
        holding = true;
        held += block(event.raw);
        return text.release(false);
      }
      held += block(event.raw);
      format.observe?.(json);
      return '';
    },
    finish() {
      const body = format.finish(holding);
      return { body, ...splitCalls(body, wire), holding, held };
    },
  };
}

/**
 * Text held until the round shows whose it is: a call of the client's or an end without recovery
 * calls passes it on (`release(true)`); a round of recovery calls only drops it (never the client's answer).
 */
class HeldText {
  decided = false;
  /** What each held event becomes once released, called in order (passing an event on may renumber it). */
  #held: ((keep: boolean) => string)[] = [];
  /** Undecided with something held: what follows is held too. */
  get holding(): boolean {
    return !this.decided && this.#held.length > 0;
  }
  hold(held: (keep: boolean) => string): string {
    this.#held.push(held);
    return '';
  }
  /** `pass()` now, or (behind held text, or when `opens` text) when released, and only if it is kept. */
  holdOr(pass: () => string, opens = false): string {
    return this.holding || opens ? this.hold((keep) => (keep ? pass() : '')) : pass();
  }
  release(keep: boolean): string {
    this.decided = true;
    const out = this.#held.map((h) => h(keep)).join('');
    this.#held = [];
    return out;
  }
}

/** Events that end a client stream cleanly when a held round cannot be continued. */
export function closingEvents(format: RecoveryWireFormat, state: StreamState): string {
  const id = state.id === undefined ? {} : { id: state.id };
  if (format === 'chat') {
    const object = 'chat.completion.chunk';
    const usage = state.usage === undefined ? '' : chunk({ ...id, object, choices: [], usage: state.usage });
    return (
      chunk({ ...id, object, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }) +
      usage +
      block('data: [DONE]')
    );
  }
  if (format === 'responses') {
    const response = {
      ...id,
      object: 'response',
      status: 'completed',
      output: state.visibleItems,
      ...(state.usage === undefined ? {} : { usage: state.usage }),
    };
    return emit('response.completed', { type: 'response.completed', sequence_number: state.sequence++, response });
  }
  const delta = { stop_reason: 'end_turn', stop_sequence: null };
  return (
    emit('message_delta', { type: 'message_delta', delta, usage: state.usage ?? { output_tokens: 0 } }) +
    emit('message_stop', { type: 'message_stop' })
  );
}

// ---------------------------------------------------------------------------------------------

interface ChatCall {
  id: string;
  name: string;
  args: string;
  readonly recovery: boolean;
  readonly visible: number;
}

/** What a Chat round has seen so far: its calls by stream index, usage, text, finish reason and last chunk. */
interface ChatRoundState {
  readonly calls: Map<number, ChatCall>;
  // This round's usage (the chunk the client asked for with `stream_options.include_usage`).
  usage?: Obj;
  content: string;
  finish: unknown;
  /** The index the client's next call gets: also how many calls of the client's the round made. */
  nextVisible: number;
  last?: Obj;
}

function chatRound(state: StreamState, canContinue: boolean, text: HeldText): RoundFormat {
  const r: ChatRoundState = { calls: new Map(), content: '', finish: null, nextVisible: 0 };
  return {
    push(given, givenJson) {
      const [event, json] = oneChatAnswer(state, given, givenJson);
      const out = chatPush(r, state, canContinue, event, json);
      if (out === HOLD || text.decided || out === '') return out;
      if (r.nextVisible > 0) return text.release(true) + out;
      const choice = firstChoice(json);
      if (json === undefined || choice === undefined) return out;
      if (isFinish(choice['finish_reason'])) return text.release(r.calls.size === 0) + out;
      const delta = isObj(choice['delta']) ? choice['delta'] : {};
      if (typeof delta['content'] !== 'string' || delta['content'] === '') return out;
      const { content: _text, ...rest } = delta;
      const without = Object.keys(rest).length > 0 ? chunk(withChoice(json, { ...choice, delta: rest })) : '';
      return text.hold((keep) => (keep ? out : without));
    },
    observe(json) {
      if (isObj(json?.['usage'])) r.usage = json['usage'];
    },
    finish(holding) {
      if (holding) state.usage = sumUsage(state.usage, r.usage);
      return chatBody(r);
    },
  };
}

/** The first choice of a Chat chunk. */
function firstChoice(json: Obj | undefined): Obj | undefined {
  const choices = json?.['choices'];
  return Array.isArray(choices) && isObj(choices[0]) ? choices[0] : undefined;
}

/** A Chat chunk with its first choice replaced. */
const withChoice = (json: Obj, choice: Obj): Obj => ({
  ...json,
  choices: [choice, ...(json['choices'] as unknown[]).slice(1)],
});

const isFinish = (reason: unknown): boolean => reason !== null && reason !== undefined;

/** A Chat chunk as part of one answer: the first chunk's id on every chunk, the assistant role said once. */
function oneChatAnswer(state: StreamState, event: SseEvent, json: Obj | undefined): [SseEvent, Obj | undefined] {
  if (json === undefined) return [event, json];
  let out = json;
  const id = json['id'];
  if (typeof id === 'string') {
    if (state.id === undefined) state.id = id;
    else if (id !== state.id) out = { ...out, id: state.id };
  }
  const choice = firstChoice(json);
  if (choice !== undefined && isObj(choice['delta']) && choice['delta']['role'] !== undefined) {
    if (state.roleSent) {
      const { role: _role, ...rest } = choice['delta'];
      out = withChoice(out, { ...choice, delta: rest });
    } else state.roleSent = true;
  }
  if (out === json) return [event, json];
  const data = JSON.stringify(out);
  return [{ raw: `data: ${data}`, data }, out];
}

/** One event of a Chat round as the client gets it: recovery calls left out, the others renumbered. */
function chatPush(
  r: ChatRoundState,
  state: StreamState,
  canContinue: boolean,
  event: SseEvent,
  given: Obj | undefined,
): string | typeof HOLD {
  if (given === undefined) return block(event.raw);
  let json = given;
  // Usage: the client is told every round's, added up.
  let changed = false;
  if (isObj(json['usage'])) {
    r.usage = json['usage'];
    if (state.usage !== undefined) {
      json = { ...json, usage: sumUsage(state.usage, r.usage) };
      changed = true;
    }
  }
  const choice = firstChoice(json);
  if (choice === undefined) return changed ? chunk(json) : block(event.raw);
  r.last = json;
  let delta = isObj(choice['delta']) ? choice['delta'] : {};
  if (typeof delta['content'] === 'string') r.content += delta['content'];
  if (Array.isArray(delta['tool_calls'])) {
    let renumbered = false;
    const kept: unknown[] = [];
    for (const tc of delta['tool_calls']) {
      if (!isObj(tc) || typeof tc['index'] !== 'number') {
        kept.push(tc);
        continue;
      }
      const fn = isObj(tc['function']) ? tc['function'] : {};
      let call = r.calls.get(tc['index']);
      if (call === undefined) {
        const recovery = isRecoveryCall(tc, 'chat');
        call = {
          id: String(tc['id'] ?? ''),
          name: String(fn['name'] ?? ''),
          args: '',
          recovery,
          visible: recovery ? -1 : r.nextVisible++,
        };
        r.calls.set(tc['index'], call);
      }
      if (typeof fn['arguments'] === 'string') call.args += fn['arguments'];
      if (call.recovery) renumbered = true;
      else if (call.visible !== tc['index']) {
        renumbered = true;
        kept.push({ ...tc, index: call.visible });
      } else kept.push(tc);
    }
    if (renumbered) {
      const { tool_calls: _all, ...rest } = delta;
      delta = kept.length > 0 ? { ...rest, tool_calls: kept } : rest;
      changed = true;
    }
  }
  let finishReason = choice['finish_reason'];
  if (isFinish(finishReason)) {
    r.finish = finishReason;
    if (r.calls.size > 0 && r.nextVisible === 0) {
      if (canContinue) return HOLD;
      finishReason = 'stop';
      changed = true;
    }
  }
  if (!changed) return block(event.raw);
  if (Object.keys(delta).length === 0 && !isFinish(finishReason) && json['usage'] === undefined) return '';
  return chunk(withChoice(json, { ...choice, delta, finish_reason: finishReason ?? null }));
}

function chatBody(r: ChatRoundState): Obj {
  const toolCalls = [...r.calls.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([, c]) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.args } }));
  const message: Obj = { role: 'assistant', content: r.content === '' ? null : r.content };
  if (toolCalls.length > 0) message['tool_calls'] = toolCalls;
  return {
    ...(r.last === undefined ? {} : { id: r.last['id'], model: r.last['model'] }),
    choices: [{ index: 0, message, finish_reason: r.finish }],
  };
}

// ---------------------------------------------------------------------------------------------

function responsesRound(state: StreamState, canContinue: boolean, text: HeldText): RoundFormat {
  const map = new Map<number, number>();
  const roundVisible: unknown[] = [];
  /** An event as the client gets it: renumbered, recovery items left out; `dropText`: the round was the recovery's. */
  function pass(event: SseEvent, json: Obj, type: string, dropText = false): string {
    let out: Obj = json;
    if (typeof json['output_index'] === 'number') {
      const index = json['output_index'];
      if (type === 'response.output_item.added' && !map.has(index)) map.set(index, state.nextVisible++);
      const visible = map.get(index) ?? index;
      if (visible === -1) return '';
      if (type === 'response.output_item.done') roundVisible.push(json['item']);
      if (visible !== index) out = { ...out, output_index: visible };
    }
    if (type === 'response.completed' || type === 'response.incomplete' || type === 'response.failed') {
      const response = isObj(json['response']) ? json['response'] : {};
      const split = splitCalls(response, 'responses');
      const own = stripRecoveryCalls(response, 'responses', dropText) as Obj;
      const output = [...state.visibleItems, ...(Array.isArray(own['output']) ? own['output'] : [])];
      const total = state.usage === undefined ? undefined : sumUsage(state.usage, usageOf(response));
      // One answer, one id: the closing response carries the id the client was given when it started.
      const id = state.id !== undefined && own['id'] !== state.id ? { id: state.id } : {};
      if (state.visibleItems.length > 0 || split.recovery.length > 0 || total !== undefined || 'id' in id)
        out = { ...out, response: { ...own, ...id, output, ...(total === undefined ? {} : { usage: total }) } };
    }
    if (typeof out['sequence_number'] === 'number') {
      const sequence = state.sequence++;
      if (sequence !== out['sequence_number']) out = { ...out, sequence_number: sequence };
    }
    return out === json ? block(event.raw) : emit(type, out);
  }
  let body: unknown;
  let usage: Obj | undefined;
  return {
    push(event, json, type) {
      if (json === undefined) return text.holdOr(() => block(event.raw));
      if ((type === 'response.created' || type === 'response.in_progress') && state.round > 0) return '';
      if (type === 'response.created' && state.id === undefined && isObj(json['response'])) {
        const id = json['response']['id'];
        if (typeof id === 'string') state.id = id;
      }
      const index = typeof json['output_index'] === 'number' ? json['output_index'] : undefined;
      const item = isObj(json['item']) ? json['item'] : undefined;
      if (type === 'response.output_item.added' && index !== undefined && item !== undefined) {
        if (isRecoveryCall(item, 'responses')) map.set(index, -1);
        else if (!text.decided && (item['type'] === 'function_call' || item['type'] === 'custom_tool_call'))
          return text.release(true) + pass(event, json, type);
      }
      if (type === 'response.completed' || type === 'response.incomplete' || type === 'response.failed') {
        const response = isObj(json['response']) ? json['response'] : {};
        body = response;
        usage = usageOf(response);
        const only = recoveryOnly(splitCalls(response, 'responses'));
        if (type === 'response.completed' && only && canContinue) return HOLD;
        return text.release(!only) + pass(event, json, type, only);
      }
      if (type === 'error') return text.release(true) + pass(event, json, type);
      if (index !== undefined && map.get(index) === -1) return '';
      const opensText = !text.decided && type === 'response.output_item.added' && item?.['type'] === 'message';
      return text.holdOr(() => pass(event, json, type), opensText);
    },
    finish(holding) {
      if (holding) {
        state.visibleItems.push(...roundVisible);
        state.usage = sumUsage(state.usage, usage);
      }
      return body;
    },
  };
}

// ---------------------------------------------------------------------------------------------

interface AnthropicBlock {
  readonly block: Obj;
  readonly recovery: boolean;
  /** The index the client sees: -1 for a recovery call, undefined until the block is passed on. */
  visible: number | undefined;
  json: string;
}

function anthropicRound(state: StreamState, canContinue: boolean, text: HeldText): RoundFormat {
  const blocks = new Map<number, AnthropicBlock>();
  /** A content-block event as the client gets it: renumbered (the index is taken when the block starts). */
  function pass(event: SseEvent, json: Obj, type: string, entry: AnthropicBlock): string {
    if (entry.visible === undefined) entry.visible = state.nextVisible++;
    return entry.visible === json['index'] ? block(event.raw) : emit(type, { ...json, index: entry.visible });
  }
  let stop: unknown = null;
  let message: Obj = {};
  let startUsage: Obj | undefined;
  let deltaUsage: Obj | undefined;
  const content = (): Obj[] => [...blocks.entries()].sort((a, b) => a[0] - b[0]).map(([, b]) => b.block);
  // This round's usage: message_start's, its counters updated by message_delta's (cumulative).
  const roundUsage = (): Obj | undefined =>
    startUsage === undefined && deltaUsage === undefined ? undefined : { ...startUsage, ...deltaUsage };
  const holdOrPass = (event: SseEvent): string => text.holdOr(() => block(event.raw));
  return {
    push(event, json, type) {
      if (json === undefined) return holdOrPass(event);
      if (type === 'message_start') {
        if (isObj(json['message'])) message = json['message'];
        startUsage = usageOf(message);
        return state.round > 0 ? '' : block(event.raw);
      }
      if (type === 'content_block_start' || type === 'content_block_delta' || type === 'content_block_stop') {
        const entry = contentBlock(blocks, type, json);
        if (entry === undefined) return holdOrPass(event);
        if (entry.recovery) return '';
        const starts = !text.decided && type === 'content_block_start';
        if (starts && entry.block['type'] === 'tool_use') return text.release(true) + pass(event, json, type, entry);
        const opensText = starts && entry.block['type'] === 'text';
        return text.holdOr(() => pass(event, json, type, entry), opensText);
      }
      if (type === 'message_delta') {
        const delta = isObj(json['delta']) ? json['delta'] : {};
        stop = delta['stop_reason'] ?? stop;
        deltaUsage = usageOf(json);
        const only = recoveryOnly(splitCalls({ content: content() }, 'anthropic'));
        if (only && canContinue) return HOLD;
        let out: Obj = json;
        if (only) out = { ...out, delta: { ...delta, stop_reason: 'end_turn' } };
        if (state.usage !== undefined) out = { ...out, usage: sumUsage(state.usage, roundUsage()) };
        return text.release(!only) + (out === json ? block(event.raw) : emit(type, out));
      }
      if (type === 'message_stop' || type === 'error') return text.release(true) + block(event.raw);
      return holdOrPass(event);
    },
    finish(holding) {
      if (holding) state.usage = sumUsage(state.usage, roundUsage());
      return { ...message, content: content(), stop_reason: stop };
    },
  };
}

/** The block a content-block event is about (a start opens it), its delta added and, at its stop, its input parsed. */
function contentBlock(blocks: Map<number, AnthropicBlock>, type: string, json: Obj): AnthropicBlock | undefined {
  const index = typeof json['index'] === 'number' ? json['index'] : -1;
  let entry = blocks.get(index);
  if (type === 'content_block_start') {
    const start = isObj(json['content_block']) ? { ...json['content_block'] } : {};
    const recovery = isRecoveryCall(start, 'anthropic');
    entry = { block: start, recovery, visible: recovery ? -1 : undefined, json: '' };
    blocks.set(index, entry);
  }
  if (entry === undefined) return undefined;
  if (type === 'content_block_delta' && isObj(json['delta'])) accumulate(entry, json['delta']);
  if (
    type === 'content_block_stop' &&
    (entry.block['type'] === 'tool_use' || entry.block['type'] === 'server_tool_use') &&
    entry.json !== ''
  ) {
    try {
      entry.block['input'] = JSON.parse(entry.json) as unknown;
    } catch {
      entry.block['input'] = {};
    }
  }
  return entry;
}

function accumulate(entry: AnthropicBlock, delta: Obj): void {
  const b = entry.block;
  const type = delta['type'];
  if (type === 'text_delta' || type === 'thinking_delta') {
    const key = type === 'text_delta' ? 'text' : 'thinking';
    b[key] = `${typeof b[key] === 'string' ? b[key] : ''}${String(delta[key] ?? '')}`;
  } else if (type === 'signature_delta') b['signature'] = delta['signature'];
  else if (type === 'input_json_delta') entry.json += String(delta['partial_json'] ?? '');
}
