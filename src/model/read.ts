/**
 * Read a provider request as slots. Reading never copies or mutates: every slot value is the
 * caller's own object or string. Shapes the reader does not know are simply not slotted, so they
 * pass through any write-back untouched.
 */
import type { RequestFormat } from '../step.js';
import type { ItemInfo, ItemRole, RequestView, Slot, SlotPath } from './types.js';

type Obj = Readonly<Record<string, unknown>>;

/** A JSON object: not null, not an array. */
export const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** Options of {@link readRequest}. */
export interface ReadOptions {
  /** Skip detection and read the request as this format. @defaultValue detected */
  readonly format?: RequestFormat;
}

/**
 * Parse tool-call arguments: a JSON object text or an object; anything else → `{}`.
 *
 * @example
 * parseArgs('{"command":"ls"}'); // { command: 'ls' }
 * parseArgs('not json'); // {}
 */
export function parseArgs(raw: unknown): Readonly<Record<string, unknown>> {
  if (isObj(raw)) return raw;
  if (typeof raw !== 'string' || raw.trim() === '') return {};
  try {
    const parsed: unknown = JSON.parse(raw);
    return isObj(parsed) ? parsed : {};
  } catch {
    return {};
  }
}

/**
 * Which wire format a request uses (`unknown` when it has no conversation list). A guess, for
 * library calls that name no format: hosts that know it (the gateway's endpoint, an adapter) pass
 * it as `StepContext.format` and nothing guesses. Chat Completions' own shapes (a `tool` or
 * `function` role, `tool_calls`) decide first; then a top-level `system` or Anthropic blocks make
 * it Anthropic Messages, even beside a `system` entry in `messages` (Claude Code 2.1 sends one).
 *
 * @example
 * detectFormat({ model: 'gpt-5', input: [] }); // 'responses'
 */
export function detectFormat(request: unknown): RequestFormat {
  if (!isObj(request)) return 'unknown';
  const messages = request['messages'];
  if (Array.isArray(messages)) {
    for (const m of messages) {
      if (!isObj(m)) continue;
      const role = m['role'];
      if (role === 'tool' || role === 'function' || 'tool_calls' in m) return 'chat';
    }
    if ('system' in request) return 'anthropic';
    for (const m of messages) {
      const content = isObj(m) ? m['content'] : undefined;
      if (!Array.isArray(content)) continue;
      for (const b of content) {
        const t = isObj(b) ? b['type'] : undefined;
        if (t === 'tool_use' || t === 'tool_result' || t === 'thinking' || (t === 'image' && isObj(b) && 'source' in b))
          return 'anthropic';
        if (t === 'image_url' || t === 'input_audio') return 'chat';
      }
    }
    return 'chat';
  }
  if ('input' in request || typeof request['instructions'] === 'string') return 'responses';
  return 'unknown';
}

/**
 * The wire format of a request Step: the one its host named (`context.format`: the gateway's
 * endpoint, the adapter), else {@link detectFormat}'s guess.
 *
 * @example
 * stepFormat({ value: request, context: { sessionId: 's', format: 'anthropic' } }); // 'anthropic'
 */
export function stepFormat(step: {
  readonly value: unknown;
  readonly context: { readonly format?: RequestFormat };
}): RequestFormat {
  return step.context.format ?? detectFormat(step.value);
}

const TEXT_PART = new Set(['text', 'input_text', 'output_text']);

/**
 * Text of a message content: the string itself, or the text parts joined by newlines.
 *
 * @example
 * contentText([{ type: 'text', text: 'a' }, { type: 'image_url' }, { type: 'text', text: 'b' }]); // 'a\nb'
 */
export function contentText(content: unknown): string | undefined {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return undefined;
  const texts: string[] = [];
  for (const part of content) {
    if (isObj(part) && TEXT_PART.has(part['type'] as string) && typeof part['text'] === 'string')
      texts.push(part['text']);
  }
  return texts.length > 0 ? texts.join('\n') : undefined;
}

/** The name of one entry of a request's `tools` array, in any of the three shapes. */
export function toolName(entry: unknown): string | undefined {
  if (!isObj(entry)) return undefined;
  if (isObj(entry['function']) && typeof entry['function']['name'] === 'string') return entry['function']['name'];
  return typeof entry['name'] === 'string' ? entry['name'] : undefined;
}

/**
 * Read a request as a uniform list of slots (see {@link RequestView}).
 *
 * @example
 * const view = readRequest(request); // view.slots: instructions, messages, tool outputs …
 */
export function readRequest(request: unknown, options: ReadOptions = {}): RequestView {
  const format = options.format ?? detectFormat(request);
  if (!isObj(request) || format === 'unknown') return { format: 'unknown', items: [], itemInfo: [], slots: [] };
  const slots = headSlots(request, format);
  if (format !== 'responses') return readList(format, 'messages', request['messages'] as readonly unknown[], slots);
  const input = request['input'];
  if (typeof input === 'string') slots.push({ kind: 'user', path: ['input'], value: input, text: input });
  if (!Array.isArray(input)) return { format: 'responses', items: [], itemInfo: [], slots };
  return readList('responses', 'input', input, slots);
}

/** The slots before the first item's: tool schemas, then the format's top-level instructions. */
function headSlots(request: Obj, format: keyof typeof READERS): Slot[] {
  const slots: Slot[] = [];
  const tools = request['tools'] ?? request['functions'];
  if (Array.isArray(tools))
    slots.push({ kind: 'tool_schemas', path: ['tools' in request ? 'tools' : 'functions'], value: tools });
  const key = READERS[format].head;
  if (key !== undefined && key in request) pushInstructions(slots, request[key], [key], undefined);
  return slots;
}

function pushInstructions(slots: Slot[], value: unknown, path: SlotPath, item: number | undefined): void {
  const base = item === undefined ? {} : { item, inConversation: true };
  if (typeof value === 'string') slots.push({ kind: 'instructions', path, value, text: value, ...base });
  if (!Array.isArray(value)) return;
  value.forEach((part, j) => {
    const text = isObj(part) && (part['type'] === undefined || TEXT_PART.has(part['type'] as string)) && part['text'];
    if (typeof text === 'string')
      slots.push({ kind: 'instructions', path: [...path, j, 'text'], value: text, text, ...base });
  });
}

function messageSlot(kind: 'user' | 'assistant', m: Obj, path: SlotPath, item: number): Slot {
  const text = contentText(m['content']);
  return text === undefined ? { kind, path, value: m, item } : { kind, path, value: m, item, text };
}

interface CallInfo {
  readonly name: string;
  readonly args: Readonly<Record<string, unknown>>;
}

/** What reading a list learnt beyond its slots, kept so a longer list can be read from where it ended. */
interface ListState {
  readonly calls: Map<string, CallInfo>;
  /** Call ids outputs named without a matching call. */
  readonly unresolved: Set<string>;
  /** Slots before the first item's (tool schemas, top-level instructions). */
  readonly head: number;
  /** The view that may extend the maps (they are shared along one chain of extensions). */
  owner: RequestView | undefined;
}

/**
 * What a view read from a conversation list carries for {@link extendView} and
 * {@link viewExtends}: its list state, and the view it was extended from. Kept on the view itself,
 * under a symbol and not enumerable (a copy of the view, `{ ...view }`, carries none, and
 * serializing a view does not walk its ancestors).
 */
interface Extension {
  readonly state: ListState;
  /** The view this one was extended from; cut past the steps {@link viewExtends} follows. */
  parent: RequestView | undefined;
}

const EXTENSION = Symbol('view extension');
/** Views {@link viewExtends} follows back; the link past them is cut, or every earlier view of a session stays alive. */
const EXTENSION_STEPS = 3;

const extensionOf = (view: RequestView): Extension | undefined =>
  (view as { readonly [EXTENSION]?: Extension })[EXTENSION];

function outputSlot(
  path: SlotPath,
  value: unknown,
  item: number,
  callId: string,
  state: ListState,
  fallbackName?: string,
): Slot {
  const call = state.calls.get(callId);
  if (call === undefined) state.unresolved.add(callId);
  return {
    kind: 'tool_output',
    path,
    value,
    item,
    callId,
    toolName: call?.name ?? fallbackName ?? 'tool',
    callArgs: call?.args ?? {},
  };
}

/** The call a tool call defines (a missing name reads `tool`). */
const callOf = (name: unknown, args: unknown): CallInfo => ({ name: str(name) ?? 'tool', args: parseArgs(args) });

/** Notes the calls one item of a list defines, by call id. */
type CallsReader = (item: unknown, calls: Map<string, CallInfo>) => void;
/** Reads one item (an object) into slots, resolving outputs against `state`; returns its role. */
type ItemReader = (item: Obj, i: number, path: SlotPath, state: ListState, slots: Slot[]) => ItemRole;

const chatCalls: CallsReader = (m, calls) => {
  if (!isObj(m)) return;
  for (const c of Array.isArray(m['tool_calls']) ? m['tool_calls'] : []) {
    const fn = isObj(c) ? c['function'] : undefined;
    if (isObj(c) && isObj(fn) && typeof c['id'] === 'string') calls.set(c['id'], callOf(fn['name'], fn['arguments']));
    else if (isObj(c) && typeof c['id'] === 'string' && typeof c['name'] === 'string')
      calls.set(c['id'], callOf(c['name'], c['input']));
  }
};

/** A system, developer, user or assistant message: its slots and role; undefined for any other role. */
function readMessage(m: Obj, role: unknown, i: number, path: SlotPath, slots: Slot[]): ItemRole | undefined {
  if (role === 'system' || role === 'developer') pushInstructions(slots, m['content'], [...path, 'content'], i);
  else if (role === 'user' || role === 'assistant') slots.push(messageSlot(role, m, path, i));
  else return undefined;
  return role === 'developer' ? 'system' : role;
}

const chatItem: ItemReader = (m, i, path, state, slots) => {
  const role = m['role'];
  const read = readMessage(m, role, i, path, slots);
  const tc = read === 'assistant' ? m['tool_calls'] : undefined;
  if (Array.isArray(tc)) {
    tc.forEach((c, j) => {
      if (!isObj(c)) return;
      const fn = isObj(c['function']) ? c['function'] : undefined;
      const name = str(fn?.['name']) ?? c['name'];
      slots.push(callSlot([...path, 'tool_calls', j], c, i, c['id'], name, fn?.['arguments'] ?? c['input']));
    });
  }
  if (read !== undefined) return read;
  if (role !== 'tool' && role !== 'function') return 'other';
  if ('content' in m)
    slots.push(outputSlot([...path, 'content'], m['content'], i, str(m['tool_call_id']) ?? '', state, str(m['name'])));
  return 'tool';
};

const responsesCalls: CallsReader = (it, calls) => {
  if (isObj(it) && it['type'] === 'function_call' && typeof it['call_id'] === 'string')
    calls.set(it['call_id'], callOf(it['name'], it['arguments']));
};

const responsesItem: ItemReader = (it, i, path, state, slots) => {
  const type = it['type'];
  const role = it['role'];
  if ((type === 'message' || type === undefined) && typeof role === 'string')
    return readMessage(it, role, i, path, slots) ?? 'other';
  if (type === 'function_call') {
    slots.push(callSlot(path, it, i, it['call_id'], it['name'], it['arguments']));
    return 'assistant';
  }
  if (type === 'function_call_output') {
    if ('output' in it) slots.push(outputSlot([...path, 'output'], it['output'], i, str(it['call_id']) ?? '', state));
    return 'tool';
  }
  return type === 'reasoning' ? 'assistant' : 'other';
};

const anthropicCalls: CallsReader = (m, calls) => {
  const content = isObj(m) ? m['content'] : undefined;
  if (!Array.isArray(content)) return;
  for (const b of content) {
    if (isObj(b) && b['type'] === 'tool_use' && typeof b['id'] === 'string')
      calls.set(b['id'], callOf(b['name'], b['input']));
  }
};

const anthropicItem: ItemReader = (m, i, path, state, slots) => {
  const role = m['role'];
  const content = m['content'];
  if (role === 'assistant') {
    slots.push(messageSlot('assistant', m, path, i));
    if (Array.isArray(content)) {
      content.forEach((b, j) => {
        if (isObj(b) && b['type'] === 'tool_use')
          slots.push(callSlot([...path, 'content', j], b, i, b['id'], b['name'], b['input']));
      });
    }
    return 'assistant';
  }
  if (role !== 'user') return 'other';
  // A user message carrying tool_result blocks closes the previous step (tool_result must follow
  // its tool_use), even when it also carries text: it never starts a step of its own.
  let results = 0;
  if (Array.isArray(content)) {
    content.forEach((b, j) => {
      if (isObj(b) && b['type'] === 'tool_result') {
        results++;
        slots.push(outputSlot([...path, 'content', j, 'content'], b['content'], i, str(b['tool_use_id']) ?? '', state));
      }
    });
  }
  if (results === 0) slots.push(messageSlot('user', m, path, i));
  return results > 0 ? 'tool' : 'user';
};

/** Read a conversation list whole (after the head slots): its calls, then its items. */
function readList(
  format: keyof typeof READERS,
  listKey: NonNullable<RequestView['listKey']>,
  items: readonly unknown[],
  slots: Slot[],
): RequestView {
  const state: ListState = { calls: new Map(), unresolved: new Set(), head: slots.length, owner: undefined };
  for (let i = 0; i < items.length; i++) READERS[format].calls(items[i], state.calls);
  const info: ItemInfo[] = [];
  readItems(READERS[format].item, listKey, items, 0, state, slots, info);
  return own({ format, listKey, items, itemInfo: info, slots }, state);
}

/** Read the list's items from `from` on; an item that is not an object is recorded as `other`. */
function readItems(
  read: ItemReader,
  listKey: string,
  items: readonly unknown[],
  from: number,
  state: ListState,
  slots: Slot[],
  info: ItemInfo[],
): void {
  for (let i = from; i < items.length; i++) {
    const item = items[i];
    const role = isObj(item) ? read(item, i, [listKey, i], state, slots) : 'other';
    info.push({ role, userText: role === 'user' });
  }
}

/** The slot of one tool call (`callId` and `toolName` as found; a missing name reads `tool`). */
function callSlot(path: SlotPath, value: Obj, item: number, callId: unknown, toolName: unknown, args: unknown): Slot {
  return {
    kind: 'tool_call',
    path,
    value,
    item,
    callId: str(callId) ?? '',
    toolName: str(toolName) ?? 'tool',
    args: parseArgs(args),
  };
}

function own(view: RequestView, state: ListState, parent?: RequestView): RequestView {
  state.owner = view;
  Object.defineProperty(view, EXTENSION, { value: { state, parent } satisfies Extension });
  // Cut the link past the ones viewExtends follows.
  let end: RequestView | undefined = view;
  for (let step = 0; step < EXTENSION_STEPS && end !== undefined; step++) end = extensionOf(end)?.parent;
  const past = end === undefined ? undefined : extensionOf(end);
  if (past !== undefined) past.parent = undefined;
  return view;
}

/** Each format's reader: the top-level field of its instructions, its calls and its items. */
const READERS: Readonly<
  Record<'chat' | 'responses' | 'anthropic', { head?: 'instructions' | 'system'; calls: CallsReader; item: ItemReader }>
> = {
  chat: { calls: chatCalls, item: chatItem },
  responses: { head: 'instructions', calls: responsesCalls, item: responsesItem },
  anthropic: { head: 'system', calls: anthropicCalls, item: anthropicItem },
};

/**
 * `readRequest(request)` from the view of an earlier request whose conversation list is a leading
 * run (the very same item objects) of this one's: the earlier items' slots are reused and only the
 * new items are read. Undefined when that would not give exactly what `readRequest` gives (another
 * format, a shorter or different list, a new item defining a call id the earlier items already
 * define or name, a view that was already extended): then read the whole request.
 */
export function extendView(
  previous: RequestView,
  request: unknown,
  options: ReadOptions = {},
  /** Leading items the caller already found to be `previous.items`' own: not compared again. */
  checked = 0,
): RequestView | undefined {
  const state = extensionOf(previous)?.state;
  if (state === undefined || state.owner !== previous || previous.listKey === undefined || !isObj(request))
    return undefined;
  const format = options.format ?? detectFormat(request);
  if (format !== previous.format || format === 'unknown') return undefined;
  const items = request[previous.listKey];
  const from = previous.items.length;
  if (!Array.isArray(items) || items.length < from) return undefined;
  for (let i = checked; i < from; i++) if (items[i] !== previous.items[i]) return undefined;
  const reader = READERS[format];
  // Calls the new items define must be new ids: a later definition would re-resolve an earlier output.
  const added = new Map<string, CallInfo>();
  for (let i = from; i < items.length; i++) reader.calls(items[i], added);
  for (const id of added.keys()) if (state.calls.has(id) || state.unresolved.has(id)) return undefined;
  const head = headSlots(request, format);
  if (head.length !== state.head) return undefined;
  for (const [id, call] of added) state.calls.set(id, call);
  // The new items are read apart and joined once: each history-long array is allocated at its size.
  const [newSlots, newInfo]: [Slot[], ItemInfo[]] = [[], []];
  readItems(reader.item, previous.listKey, items, from, state, newSlots, newInfo);
  const slots = previous.slots.concat(newSlots);
  for (let i = 0; i < head.length; i++) slots[i] = head[i]!;
  const info = previous.itemInfo.concat(newInfo);
  return own({ format, listKey: previous.listKey, items, itemInfo: info, slots }, state, previous);
}

/**
 * True when `view` was extended (by {@link extendView}, at most three times in a row) from `base`:
 * every item slot of `base` is then the very same object at the same position in `view.slots`
 * (head slots, before the first item slot, are read again).
 */
export function viewExtends(view: RequestView, base: RequestView): boolean {
  let at: RequestView | undefined = view;
  for (let step = 0; step < EXTENSION_STEPS && at !== undefined; step++) {
    at = extensionOf(at)?.parent;
    if (at === base) return true;
  }
  return false;
}
