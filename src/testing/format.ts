/**
 * Format rules the kit checks: which wire format a request is, its conversation list, the prompt
 * prefix a provider caches, and the role rules each format enforces.
 */
import { canonicalJson } from '../measure/index.js';
import type { ProviderRequest } from '../step.js';
import type { WireFormat } from './arbitraries/requests.js';

type Item = Readonly<Record<string, unknown>>;

const isObject = (v: unknown): v is Item => typeof v === 'object' && v !== null && !Array.isArray(v);
const blocks = (content: unknown): Item[] => (Array.isArray(content) ? content.filter(isObject) : []);

/**
 * Best-effort wire format of a request; undefined when it is none of the three.
 *
 * @example
 * import { requestFormat } from 'token-terminator/testing';
 * requestFormat({ model: 'gpt-5', input: 'hi' }); // 'responses'
 */
export function requestFormat(request: ProviderRequest): WireFormat | undefined {
  if (Array.isArray(request['input']) || typeof request['input'] === 'string') return 'responses';
  const messages = request['messages'];
  if (!Array.isArray(messages)) return undefined;
  const items = messages.filter(isObject);
  const chatSignals = items.some(
    (m) =>
      m['role'] === 'system' || m['role'] === 'developer' || m['role'] === 'tool' || Array.isArray(m['tool_calls']),
  );
  if (chatSignals) return 'chat';
  const anthropicSignals =
    request['system'] !== undefined ||
    items.some((m) =>
      blocks(m['content']).some(
        (b) => b['type'] === 'tool_use' || b['type'] === 'tool_result' || b['type'] === 'image',
      ),
    );
  if (anthropicSignals) return 'anthropic';
  return request['max_tokens'] !== undefined && request['max_completion_tokens'] === undefined ? 'anthropic' : 'chat';
}

/**
 * The conversation list of a request (`messages` or `input`), or [] when absent.
 *
 * @example
 * import { conversationItems } from 'token-terminator/testing';
 * conversationItems({ model: 'gpt-5', input: [{ role: 'user', content: 'hi' }] }).length; // 1
 */
export function conversationItems(request: ProviderRequest): readonly unknown[] {
  const list = Array.isArray(request['input']) ? request['input'] : request['messages'];
  return Array.isArray(list) ? list : [];
}

/**
 * The request as the ordered units a provider's prompt cache sees: tool schemas, instructions,
 * then each conversation item, serialized. A cache hit needs these as a prefix of the next request.
 *
 * @example
 * import { promptSegments } from 'token-terminator/testing';
 * promptSegments({ system: 'Be brief.', messages: [{ role: 'user', content: 'hi' }] }).map((s) => s.label);
 * // ['system', 'messages[0] (user)']
 */
export function promptSegments(request: ProviderRequest): { readonly label: string; readonly text: string }[] {
  const out: { label: string; text: string }[] = [];
  for (const key of ['tools', 'system', 'instructions'] as const) {
    if (request[key] !== undefined) out.push({ label: key, text: canonicalJson(request[key]) });
  }
  const listKey = Array.isArray(request['input']) ? 'input' : 'messages';
  conversationItems(request).forEach((item, i) => {
    const role = isObject(item) ? (item['role'] ?? item['type']) : typeof item;
    out.push({ label: `${listKey}[${i}] (${String(role)})`, text: canonicalJson(item) });
  });
  return out;
}

/**
 * Role problems of a request for its format: an empty list means a provider would accept the
 * shape. Each problem names the item index so counterexamples point at the broken message.
 *
 * @example
 * import { roleProblems } from 'token-terminator/testing';
 * import { expect } from 'vitest';
 * expect(roleProblems(output)).toEqual([]);
 */
export function roleProblems(
  request: ProviderRequest,
  format: WireFormat | undefined = requestFormat(request),
): string[] {
  if (format === 'chat') return chatProblems(conversationItems(request));
  if (format === 'responses') return responsesProblems(conversationItems(request));
  if (format === 'anthropic') return anthropicProblems(request);
  return [];
}

function chatProblems(list: readonly unknown[]): string[] {
  const problems: string[] = [];
  const roles = new Set(['system', 'developer', 'user', 'assistant', 'tool']);
  let open = new Set<string>();
  list.forEach((m, i) => {
    if (!isObject(m) || typeof m['role'] !== 'string' || !roles.has(m['role'])) {
      problems.push(`messages[${i}] has no valid chat role`);
      return;
    }
    const role = m['role'];
    if (role === 'tool') {
      const id = m['tool_call_id'];
      if (typeof id !== 'string' || !open.has(id))
        problems.push(`messages[${i}] (tool) answers no pending tool call of the preceding assistant message`);
      else open.delete(id);
      return;
    }
    if (open.size > 0) problems.push(`messages[${i}] (${role}) arrives while ${open.size} tool call(s) are unanswered`);
    open = new Set();
    if (role === 'assistant' && Array.isArray(m['tool_calls'])) {
      for (const call of m['tool_calls'].filter(isObject)) if (typeof call['id'] === 'string') open.add(call['id']);
    }
    const prev = list[i - 1];
    if (role === 'user' && isObject(prev) && prev['role'] === 'user')
      problems.push(`messages[${i}] is a second consecutive user message`);
  });
  return problems;
}

function responsesProblems(list: readonly unknown[]): string[] {
  const problems: string[] = [];
  const calls = new Set<string>();
  const roles = new Set(['system', 'developer', 'user', 'assistant']);
  list.forEach((item, i) => {
    if (!isObject(item)) {
      problems.push(`input[${i}] is not an object`);
      return;
    }
    const type = item['type'] ?? 'message';
    if (type === 'message' && (typeof item['role'] !== 'string' || !roles.has(item['role'])))
      problems.push(`input[${i}] has no valid message role`);
    if (type === 'function_call' && typeof item['call_id'] === 'string') calls.add(item['call_id']);
    if (type === 'function_call_output' && (typeof item['call_id'] !== 'string' || !calls.has(item['call_id']))) {
      problems.push(`input[${i}] (function_call_output) answers no earlier function_call`);
    }
  });
  return problems;
}

function anthropicProblems(request: ProviderRequest): string[] {
  const problems: string[] = [];
  const list = conversationItems(request);
  let pending: string[] = [];
  list.forEach((m, i) => {
    if (!isObject(m) || (m['role'] !== 'user' && m['role'] !== 'assistant')) {
      problems.push(`messages[${i}] has no valid anthropic role (user or assistant)`);
      return;
    }
    const role = m['role'];
    const expected = i % 2 === 0 ? 'user' : 'assistant';
    if (role !== expected) problems.push(`messages[${i}] is ${role} where alternation needs ${expected}`);
    const content = blocks(m['content']);
    const results = content.filter((b) => b['type'] === 'tool_result').map((b) => String(b['tool_use_id']));
    if (pending.length > 0) {
      const missing = pending.filter((id) => !results.includes(id));
      if (role !== 'user' || missing.length > 0)
        problems.push(
          `messages[${i}] does not answer tool_use ${missing.join(', ') || pending.join(', ')} of messages[${i - 1}]`,
        );
      const firstOther = content.findIndex((b) => b['type'] !== 'tool_result');
      if (firstOther !== -1 && content.slice(firstOther).some((b) => b['type'] === 'tool_result'))
        problems.push(`messages[${i}] puts text before a tool_result block`);
    }
    const stray = results.filter((id) => !pending.includes(id));
    if (stray.length > 0)
      problems.push(`messages[${i}] has tool_result ${stray.join(', ')} with no tool_use in the previous message`);
    pending = role === 'assistant' ? content.filter((b) => b['type'] === 'tool_use').map((b) => String(b['id'])) : [];
  });
  return problems;
}
