/**
 * Agents SDK input items ↔ Responses API input items, for the request pipeline.
 *
 * Messages are already Responses-shaped and pass by reference. Function calls and results are
 * renamed to their wire form (`call_id`, `function_call_output` with a string output). On the way
 * back an item the pipeline left untouched maps to its original SDK item; a changed one is
 * rebuilt from the SDK item it replaces, so ids, status and provider data survive.
 */
import type { AgentInputItem } from '@openai/agents';

type Item = Record<string, unknown>;

/** Responses API input built from Agents SDK items, plus the maps {@link fromResponsesInput} needs to map it back. */
export interface ResponsesConversion {
  /** The Responses API input items, in the order of the SDK items. */
  readonly input: Item[];
  /** Wire item → the SDK item it was built from. */
  readonly sources: ReadonlyMap<object, AgentInputItem>;
  /** call id → the SDK function_call_result item. */
  readonly results: ReadonlyMap<string, AgentInputItem>;
  /** call id → the SDK function_call item. */
  readonly calls: ReadonlyMap<string, AgentInputItem>;
}

/**
 * Text of an SDK tool output: a string, `{type:'text'}` or a list of text items; undefined otherwise.
 *
 * @example
 * outputText({ type: 'text', text: 'done' }); // 'done'
 */
export function outputText(output: unknown): string | undefined {
  if (typeof output === 'string') return output;
  const one = output as { type?: unknown; text?: unknown } | null;
  if (one !== null && typeof one === 'object' && !Array.isArray(one))
    return one.type === 'text' && typeof one.text === 'string' ? one.text : undefined;
  if (!Array.isArray(output)) return undefined;
  const parts = output as { type?: unknown; text?: unknown }[];
  const texts = parts.every((p) => (p.type === 'text' || p.type === 'input_text') && typeof p.text === 'string');
  return texts ? parts.map((p) => p.text as string).join('') : undefined;
}

/**
 * Agents SDK input items as Responses API input items (messages by reference, function calls and results renamed).
 *
 * @example
 * const conversion = toResponsesInput(modelData.input);
 */
export function toResponsesInput(items: readonly AgentInputItem[]): ResponsesConversion {
  const sources = new Map<object, AgentInputItem>();
  const results = new Map<string, AgentInputItem>();
  const calls = new Map<string, AgentInputItem>();
  const input = items.map((item) => {
    const it = item as unknown as Item;
    let wire: Item = it;
    if (it['type'] === 'function_call' && typeof it['callId'] === 'string') {
      calls.set(it['callId'], item);
      wire = { type: 'function_call', call_id: it['callId'], name: it['name'], arguments: it['arguments'] };
    } else if (it['type'] === 'function_call_result' && typeof it['callId'] === 'string') {
      const text = outputText(it['output']);
      if (text !== undefined) {
        results.set(it['callId'], item);
        wire = { type: 'function_call_output', call_id: it['callId'], output: text };
      }
    }
    sources.set(wire, item);
    return wire;
  });
  return { input, sources, results, calls };
}

/**
 * Compiled Responses API items back as Agents SDK items: untouched ones are the original SDK items, changed ones are rebuilt from the SDK item they replace.
 *
 * @example
 * const items = fromResponsesInput(compiled.input, toResponsesInput(modelData.input));
 */
export function fromResponsesInput(compiled: readonly unknown[], conversion: ResponsesConversion): AgentInputItem[] {
  return compiled.map((value) => {
    const wire = value as Item;
    const source = conversion.sources.get(wire);
    if (source !== undefined) return source;
    const callId = wire['call_id'];
    if (wire['type'] === 'function_call_output' && typeof callId === 'string') {
      const template = conversion.results.get(callId) as unknown as Item | undefined;
      const output = typeof wire['output'] === 'string' ? { type: 'text', text: wire['output'] } : wire['output'];
      const base = template ?? { type: 'function_call_result', callId, name: 'tool', status: 'completed' };
      return { ...base, output } as unknown as AgentInputItem;
    }
    if (wire['type'] === 'function_call' && typeof callId === 'string') {
      const template = conversion.calls.get(callId) as unknown as Item | undefined;
      return {
        ...(template ?? { type: 'function_call', callId, name: wire['name'] }),
        arguments: wire['arguments'],
      } as unknown as AgentInputItem;
    }
    return wire as unknown as AgentInputItem;
  });
}
