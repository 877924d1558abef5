/**
 * fast-check generators of role-valid conversations in the three wire formats, plus helpers
 * (deep freeze, role validity). Shared by the model, operator and compile tests.
 */
import { fc } from '@fast-check/vitest';

export type Format = 'chat' | 'responses' | 'anthropic';
export const FORMATS: readonly Format[] = ['chat', 'responses', 'anthropic'];

export interface GenCall {
  readonly name: string;
  readonly args: Record<string, unknown>;
  readonly output: string;
}
export interface GenStep {
  readonly user: string | undefined;
  readonly image: boolean;
  readonly assistant: string;
  readonly calls: readonly GenCall[];
}
export interface GenConversation {
  readonly system: string;
  readonly steps: readonly GenStep[];
}

const text = fc.string({ unit: 'binary', maxLength: 24 });
/** Small or large (repeated) output text; `big` controls how large the large ones get. */
export const outputText = (big = 400): fc.Arbitrary<string> =>
  fc.oneof(
    { weight: 3, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
    { weight: 2, arbitrary: fc.tuple(fc.string({ unit: 'binary', minLength: 1, maxLength: 12 }), fc.integer({ min: 1, max: big })).map(([s, n]) => s.repeat(Math.ceil(n / s.length) + 1)) },
    { weight: 1, arbitrary: fc.constantFrom('dup-A '.repeat(80), 'dup-B '.repeat(90)) },
  );

export const callArb = (big?: number): fc.Arbitrary<GenCall> =>
  fc.record({
    name: fc.constantFrom('read_file', 'search_files', 'bash', 'edit_file', 'weird tool]\n'),
    args: fc.dictionary(fc.constantFrom('path', 'command', 'pattern'), fc.string({ maxLength: 10 }), { maxKeys: 2 }),
    output: outputText(big),
  });

export const stepArb = (big?: number): fc.Arbitrary<GenStep> =>
  fc.record({ user: fc.option(text, { nil: undefined }), image: fc.boolean(), assistant: text, calls: fc.array(callArb(big), { maxLength: 2 }) });

export const conversationArb = (maxSteps = 10, big?: number): fc.Arbitrary<GenConversation> =>
  fc.record({ system: text, steps: fc.array(stepArb(big), { minLength: 1, maxLength: maxSteps }) });

/** Build a wire-format request from a generated conversation (role-valid for the format). */
export function buildRequest(format: Format, convo: GenConversation, upTo = convo.steps.length): Record<string, unknown> {
  const steps = convo.steps.slice(0, upTo);
  const id = (s: number, c: number): string => `call_${s}_${c}`;
  if (format === 'chat') {
    const messages: unknown[] = [{ role: 'system', content: convo.system }];
    steps.forEach((st, s) => {
      if (st.user !== undefined || s === 0) {
        const u = st.user ?? 'start';
        messages.push({ role: 'user', content: st.image ? [{ type: 'text', text: u }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }] : u });
      }
      const a: Record<string, unknown> = { role: 'assistant', content: st.assistant };
      if (st.calls.length > 0) a['tool_calls'] = st.calls.map((c, j) => ({ id: id(s, j), type: 'function', function: { name: c.name, arguments: JSON.stringify(c.args) } }));
      messages.push(a);
      st.calls.forEach((c, j) => messages.push({ role: 'tool', tool_call_id: id(s, j), content: c.output }));
    });
    return { model: 'gpt-4o', messages, tools: [{ type: 'function', function: { name: 'read_file', parameters: { type: 'object' } } }] };
  }
  if (format === 'responses') {
    const input: unknown[] = [];
    steps.forEach((st, s) => {
      if (st.user !== undefined || s === 0) {
        const u = st.user ?? 'start';
        input.push(st.image ? { type: 'message', role: 'user', content: [{ type: 'input_text', text: u }, { type: 'input_image', image_url: 'data:image/png;base64,AAAA' }] } : { role: 'user', content: u });
      }
      input.push({ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: st.assistant }] });
      st.calls.forEach((c, j) => input.push({ type: 'function_call', call_id: id(s, j), name: c.name, arguments: JSON.stringify(c.args) }));
      st.calls.forEach((c, j) => input.push({ type: 'function_call_output', call_id: id(s, j), output: c.output }));
    });
    return { model: 'gpt-5', instructions: convo.system, input };
  }
  const messages: Record<string, unknown>[] = [];
  steps.forEach((st, s) => {
    const last = messages[messages.length - 1];
    const userBlocks: unknown[] = [];
    if (st.user !== undefined || s === 0) {
      userBlocks.push({ type: 'text', text: st.user ?? 'start' });
      if (st.image) userBlocks.push({ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } });
    }
    if (last !== undefined && last['role'] === 'user') {
      // Previous step ended with tool results: text for this step rides in the same user message.
      if (userBlocks.length > 0) last['content'] = [...(last['content'] as unknown[]), ...userBlocks];
    } else if (userBlocks.length > 0 || messages.length === 0) {
      messages.push({ role: 'user', content: userBlocks.length > 0 ? userBlocks : 'start' });
    } else {
      // assistant after assistant: Anthropic needs a user message in between.
      messages.push({ role: 'user', content: 'continue' });
    }
    const content: unknown[] = [{ type: 'text', text: st.assistant }];
    st.calls.forEach((c, j) => content.push({ type: 'tool_use', id: id(s, j), name: c.name, input: c.args }));
    messages.push({ role: 'assistant', content });
    if (st.calls.length > 0) messages.push({ role: 'user', content: st.calls.map((c, j) => ({ type: 'tool_result', tool_use_id: id(s, j), content: c.output })) });
  });
  return { model: 'claude-sonnet-4', max_tokens: 1024, system: [{ type: 'text', text: convo.system }], messages };
}

/** Recursively freeze (the caller's request in every property). */
export function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value as Record<string, unknown>)) deepFreeze(v);
  }
  return value;
}

/** Structured clone for "before" snapshots. */
export const snapshot = <T>(v: T): T => structuredClone(v);

/** Role-validity problems of a request in its format ([] = valid). */
export function roleProblems(format: Format, request: Record<string, unknown>): string[] {
  const problems: string[] = [];
  if (format === 'anthropic') {
    const ms = request['messages'] as Record<string, unknown>[];
    if (ms.length > 0 && ms[0]!['role'] !== 'user') problems.push('first message not user');
    ms.forEach((m, i) => {
      if (i > 0 && ms[i - 1]!['role'] === m['role']) problems.push(`adjacent ${String(m['role'])} at ${i}`);
      const uses = Array.isArray(m['content']) ? (m['content'] as Record<string, unknown>[]).filter((b) => b['type'] === 'tool_use').map((b) => b['id']) : [];
      if (uses.length > 0) {
        const next = ms[i + 1];
        const results = next !== undefined && Array.isArray(next['content']) ? (next['content'] as Record<string, unknown>[]).filter((b) => b['type'] === 'tool_result').map((b) => b['tool_use_id']) : [];
        for (const u of uses) if (!results.includes(u)) problems.push(`tool_use ${String(u)} without result next`);
      }
      if (Array.isArray(m['content'])) {
        for (const b of m['content'] as Record<string, unknown>[]) {
          if (b['type'] !== 'tool_result') continue;
          const prev = ms[i - 1];
          const ok = prev !== undefined && Array.isArray(prev['content']) && (prev['content'] as Record<string, unknown>[]).some((p) => p['type'] === 'tool_use' && p['id'] === b['tool_use_id']);
          if (!ok) problems.push(`orphan tool_result at ${i}`);
        }
      }
    });
    return problems;
  }
  if (format === 'chat') {
    const ms = request['messages'] as Record<string, unknown>[];
    const open = new Set<unknown>();
    ms.forEach((m, i) => {
      if (m['role'] === 'assistant') {
        open.clear();
        for (const c of (m['tool_calls'] as Record<string, unknown>[] | undefined) ?? []) open.add(c['id']);
      } else if (m['role'] === 'tool') {
        if (!open.has(m['tool_call_id'])) problems.push(`orphan tool at ${i}`);
      } else open.clear();
      if (i > 0 && m['role'] === 'user' && ms[i - 1]!['role'] === 'user') problems.push(`adjacent user at ${i}`);
    });
    return problems;
  }
  const input = request['input'];
  if (!Array.isArray(input)) return problems;
  const calls = new Set<unknown>();
  (input as Record<string, unknown>[]).forEach((it, i) => {
    if (it['type'] === 'function_call') calls.add(it['call_id']);
    if (it['type'] === 'function_call_output' && !calls.has(it['call_id'])) problems.push(`orphan output at ${i}`);
    const prev = (input as Record<string, unknown>[])[i - 1];
    if (i > 0 && it['role'] === 'user' && prev!['role'] === 'user') problems.push(`adjacent user at ${i}`);
  });
  return problems;
}
