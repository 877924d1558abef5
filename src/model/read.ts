/**
 * Read a provider request as slots. Reading never copies or mutates: every slot value is the
 * caller's own object or string. Shapes the reader does not know are simply not slotted, so they
 * pass through any write-back untouched.
 */
import type { RequestFormat } from '../step.js';
import type { ItemInfo, RequestView, Slot, SlotPath } from './types.js';

type Obj = Readonly<Record<string, unknown>>;

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** Options of {@link readRequest}. */
export interface ReadOptions {
  /** Skip detection and read the request as this format. Default: detected. */
  readonly format?: RequestFormat;
}

/** Parse tool-call arguments: a JSON object text or an object; anything else → `{}`. */
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

/** Which wire format a request uses (`unknown` when it has no conversation list). */
export function detectFormat(request: unknown): RequestFormat {
  if (!isObj(request)) return 'unknown';
  const messages = request['messages'];
  if (Array.isArray(messages)) {
    for (const m of messages) {
      if (!isObj(m)) continue;
      const role = m['role'];
      if (role === 'tool' || role === 'system' || role === 'developer' || role === 'function' || 'tool_calls' in m) return 'chat';
    }
    if ('system' in request) return 'anthropic';
    for (const m of messages) {
      const content = isObj(m) ? m['content'] : undefined;
      if (!Array.isArray(content)) continue;
      for (const b of content) {
        const t = isObj(b) ? b['type'] : undefined;
        if (t === 'tool_use' || t === 'tool_result' || t === 'thinking' || (t === 'image' && isObj(b) && 'source' in b)) return 'anthropic';
        if (t === 'image_url' || t === 'input_audio') return 'chat';
      }
    }
    return 'chat';
  }
  if ('input' in request || typeof request['instructions'] === 'string') return 'responses';
  return 'unknown';
}

const TEXT_PART = new Set(['text', 'input_text', 'output_text']);

/** Text of a message content: the string itself, or the text parts joined by newlines. */
export function contentText(content: unknown): string | undefined {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return undefined;
  const texts: string[] = [];
  for (const part of content) {
    if (isObj(part) && TEXT_PART.has(part['type'] as string) && typeof part['text'] === 'string') texts.push(part['text']);
  }
  return texts.length > 0 ? texts.join('\n') : undefined;
}

/** Read a request as a uniform list of slots (see {@link RequestView}). */
export function readRequest(request: unknown, options: ReadOptions = {}): RequestView {
  const format = options.format ?? detectFormat(request);
  if (!isObj(request) || format === 'unknown') return { format: 'unknown', items: [], itemInfo: [], slots: [] };
  const slots: Slot[] = [];
  const tools = request['tools'] ?? request['functions'];
  if (Array.isArray(tools)) slots.push({ kind: 'tool_schemas', path: ['tools' in request ? 'tools' : 'functions'], value: tools });
  if (format === 'responses') return readResponses(request, slots);
  if (format === 'anthropic') return readAnthropic(request, slots);
  return readChat(request, slots);
}

function pushInstructions(slots: Slot[], value: unknown, path: SlotPath, item: number | undefined): void {
  const base = item === undefined ? {} : { item, inConversation: true };
  if (typeof value === 'string') {
    slots.push({ kind: 'instructions', path, value, text: value, ...base });
    return;
  }
  if (!Array.isArray(value)) return;
  value.forEach((part, j) => {
    if (isObj(part) && typeof part['text'] === 'string' && (part['type'] === undefined || TEXT_PART.has(part['type'] as string))) {
      slots.push({ kind: 'instructions', path: [...path, j, 'text'], value: part['text'], text: part['text'], ...base });
    }
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

function outputSlot(path: SlotPath, value: unknown, item: number, callId: string, calls: ReadonlyMap<string, CallInfo>, fallbackName?: string): Slot {
  const call = calls.get(callId);
  return { kind: 'tool_output', path, value, item, callId, toolName: call?.name ?? fallbackName ?? 'tool', callArgs: call?.args ?? {} };
}

function readChat(request: Obj, slots: Slot[]): RequestView {
  const items = request['messages'] as readonly unknown[];
  const info: ItemInfo[] = [];
  const calls = new Map<string, CallInfo>();
  for (const m of items) {
    if (!isObj(m)) continue;
    for (const c of Array.isArray(m['tool_calls']) ? m['tool_calls'] : []) {
      const fn = isObj(c) ? c['function'] : undefined;
      if (isObj(c) && isObj(fn) && typeof c['id'] === 'string') calls.set(c['id'], { name: str(fn['name']) ?? 'tool', args: parseArgs(fn['arguments']) });
      else if (isObj(c) && typeof c['id'] === 'string' && typeof c['name'] === 'string') calls.set(c['id'], { name: c['name'], args: parseArgs(c['input']) });
    }
  }
  items.forEach((m, i) => {
    const role = isObj(m) ? m['role'] : undefined;
    const path: SlotPath = ['messages', i];
    if (!isObj(m)) {
      info.push({ role: 'other', userText: false });
      return;
    }
    if (role === 'system' || role === 'developer') {
      info.push({ role: 'system', userText: false });
      pushInstructions(slots, m['content'], [...path, 'content'], i);
    } else if (role === 'user') {
      info.push({ role: 'user', userText: true });
      slots.push(messageSlot('user', m, path, i));
    } else if (role === 'assistant') {
      info.push({ role: 'assistant', userText: false });
      slots.push(messageSlot('assistant', m, path, i));
      const tc = m['tool_calls'];
      if (Array.isArray(tc)) {
        tc.forEach((c, j) => {
          if (!isObj(c)) return;
          const fn = isObj(c['function']) ? c['function'] : undefined;
          const name = str(fn?.['name']) ?? str(c['name']) ?? 'tool';
          slots.push({ kind: 'tool_call', path: [...path, 'tool_calls', j], value: c, item: i, callId: str(c['id']) ?? '', toolName: name, args: parseArgs(fn?.['arguments'] ?? c['input']) });
        });
      }
    } else if (role === 'tool' || role === 'function') {
      info.push({ role: 'tool', userText: false });
      if ('content' in m) slots.push(outputSlot([...path, 'content'], m['content'], i, str(m['tool_call_id']) ?? '', calls, str(m['name'])));
    } else {
      info.push({ role: 'other', userText: false });
    }
  });
  return { format: 'chat', listKey: 'messages', items, itemInfo: info, slots };
}

function readResponses(request: Obj, slots: Slot[]): RequestView {
  if ('instructions' in request) pushInstructions(slots, request['instructions'], ['instructions'], undefined);
  const input = request['input'];
  if (typeof input === 'string') {
    slots.push({ kind: 'user', path: ['input'], value: input, text: input });
    return { format: 'responses', items: [], itemInfo: [], slots };
  }
  if (!Array.isArray(input)) return { format: 'responses', items: [], itemInfo: [], slots };
  const calls = new Map<string, CallInfo>();
  for (const it of input) {
    if (isObj(it) && it['type'] === 'function_call' && typeof it['call_id'] === 'string') calls.set(it['call_id'], { name: str(it['name']) ?? 'tool', args: parseArgs(it['arguments']) });
  }
  const info: ItemInfo[] = [];
  input.forEach((it, i) => {
    const path: SlotPath = ['input', i];
    if (!isObj(it)) {
      info.push({ role: 'other', userText: false });
      return;
    }
    const type = it['type'];
    const role = it['role'];
    if ((type === 'message' || type === undefined) && typeof role === 'string') {
      if (role === 'system' || role === 'developer') {
        info.push({ role: 'system', userText: false });
        pushInstructions(slots, it['content'], [...path, 'content'], i);
      } else if (role === 'user') {
        info.push({ role: 'user', userText: true });
        slots.push(messageSlot('user', it, path, i));
      } else if (role === 'assistant') {
        info.push({ role: 'assistant', userText: false });
        slots.push(messageSlot('assistant', it, path, i));
      } else info.push({ role: 'other', userText: false });
    } else if (type === 'function_call') {
      info.push({ role: 'assistant', userText: false });
      slots.push({ kind: 'tool_call', path, value: it, item: i, callId: str(it['call_id']) ?? '', toolName: str(it['name']) ?? 'tool', args: parseArgs(it['arguments']) });
    } else if (type === 'function_call_output') {
      info.push({ role: 'tool', userText: false });
      if ('output' in it) slots.push(outputSlot([...path, 'output'], it['output'], i, str(it['call_id']) ?? '', calls));
    } else if (type === 'reasoning') {
      info.push({ role: 'assistant', userText: false });
    } else {
      info.push({ role: 'other', userText: false });
    }
  });
  return { format: 'responses', listKey: 'input', items: input, itemInfo: info, slots };
}

function readAnthropic(request: Obj, slots: Slot[]): RequestView {
  if ('system' in request) pushInstructions(slots, request['system'], ['system'], undefined);
  const items = request['messages'] as readonly unknown[];
  const calls = new Map<string, CallInfo>();
  for (const m of items) {
    const content = isObj(m) ? m['content'] : undefined;
    if (!Array.isArray(content)) continue;
    for (const b of content) {
      if (isObj(b) && b['type'] === 'tool_use' && typeof b['id'] === 'string') calls.set(b['id'], { name: str(b['name']) ?? 'tool', args: parseArgs(b['input']) });
    }
  }
  const info: ItemInfo[] = [];
  items.forEach((m, i) => {
    const path: SlotPath = ['messages', i];
    if (!isObj(m)) {
      info.push({ role: 'other', userText: false });
      return;
    }
    const role = m['role'];
    const content = m['content'];
    if (role === 'assistant') {
      info.push({ role: 'assistant', userText: false });
      slots.push(messageSlot('assistant', m, path, i));
      if (Array.isArray(content)) {
        content.forEach((b, j) => {
          if (isObj(b) && b['type'] === 'tool_use') {
            slots.push({ kind: 'tool_call', path: [...path, 'content', j], value: b, item: i, callId: str(b['id']) ?? '', toolName: str(b['name']) ?? 'tool', args: parseArgs(b['input']) });
          }
        });
      }
    } else if (role === 'user') {
      // A user message carrying tool_result blocks closes the previous step (tool_result must follow
      // its tool_use), even when it also carries text: it never starts a step of its own.
      let results = 0;
      if (Array.isArray(content)) {
        content.forEach((b, j) => {
          if (isObj(b) && b['type'] === 'tool_result') {
            results++;
            slots.push(outputSlot([...path, 'content', j, 'content'], b['content'], i, str(b['tool_use_id']) ?? '', calls));
          }
        });
      }
      info.push({ role: results > 0 ? 'tool' : 'user', userText: results === 0 });
      if (results === 0) slots.push(messageSlot('user', m, path, i));
    } else {
      info.push({ role: 'other', userText: false });
    }
  });
  return { format: 'anthropic', listKey: 'messages', items, itemInfo: info, slots };
}

