import { describe, expect } from 'vitest';
import { fc, it, test } from '@fast-check/vitest';
import { detectFormat, readRequest, valueAt, writeSlots } from '../../src/model/index.js';
import {
  TOOL_NAMES,
  WIRE_FORMATS,
  anyText,
  deepFreeze,
  formatRequest,
  toolOutput,
  type RequestOptions,
} from '../../src/testing/index.js';

/**
 * Requests of every format from the testing kit, with hostile texts and tool names mixed in:
 * arbitrary code points (controls, every plane) next to realistic tool outputs.
 */
const REQUESTS: RequestOptions = {
  maxTurns: 4,
  texts: fc.oneof(anyText({ maxLength: 24 }), fc.constantFrom('Run the tests.', 'ok')),
  tools: [...TOOL_NAMES, 'weird tool]\n'],
  outputs: fc.oneof(toolOutput({ sizes: ['tiny', 'medium'] }), anyText({ maxLength: 40 })),
};
const formatAndRequest = fc
  .constantFrom(...WIRE_FORMATS)
  .chain((format) => formatRequest(format, REQUESTS).map((request) => ({ format, request })));

/** Every leaf path where two JSON-like values differ. */
function diffPaths(a: unknown, b: unknown, path: (string | number)[] = [], out: string[] = []): string[] {
  if (a === b) return out;
  if (
    typeof a !== 'object' ||
    typeof b !== 'object' ||
    a === null ||
    b === null ||
    Array.isArray(a) !== Array.isArray(b)
  ) {
    out.push(JSON.stringify(path));
    return out;
  }
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const k of keys)
    diffPaths(
      (a as Record<string, unknown>)[k],
      (b as Record<string, unknown>)[k],
      [...path, Array.isArray(a) ? Number(k) : k],
      out,
    );
  return out;
}

describe('readRequest', () => {
  it('detects each format', () => {
    expect(detectFormat({ messages: [{ role: 'system', content: 'x' }] })).toBe('chat');
    expect(detectFormat({ system: 'x', messages: [{ role: 'user', content: 'hi' }] })).toBe('anthropic');
    expect(
      detectFormat({
        messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: 'r' }] }],
      }),
    ).toBe('anthropic');
    expect(detectFormat({ input: 'hello' })).toBe('responses');
    expect(detectFormat({ prompt: 'legacy' })).toBe('unknown');
    expect(detectFormat(null)).toBe('unknown');
  });

  it('guesses Anthropic for Anthropic blocks beside a stray system entry (Claude Code 2.1)', () => {
    const claudeCode = {
      system: [{ type: 'text', text: 'You are Claude Code.' }],
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'run the tests' }] },
        { role: 'system', content: 'reminder' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'Bash', input: { command: 'pytest' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'FAILED' }] },
      ],
    };
    expect(detectFormat(claudeCode)).toBe('anthropic');
    // Without a top-level system, the blocks alone decide.
    const { system: _system, ...bare } = claudeCode;
    expect(detectFormat(bare)).toBe('anthropic');
    expect(readRequest(bare).slots.find((s) => s.kind === 'tool_output')?.toolName).toBe('Bash');
    // Chat's own shapes still decide first.
    expect(
      detectFormat({
        messages: [
          { role: 'system', content: 'x' },
          { role: 'assistant', content: null, tool_calls: [] },
        ],
      }),
    ).toBe('chat');
  });

  it('resolves tool names and parsed args from the matching call (chat)', () => {
    const view = readRequest({
      messages: [
        { role: 'system', content: 'sys' },
        { role: 'user', content: 'go' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'c1', type: 'function', function: { name: 'grep', arguments: '{"pattern":"x"}' } }],
        },
        { role: 'tool', tool_call_id: 'c1', content: 'out' },
        { role: 'tool', tool_call_id: 'nope', content: 'orphan' },
      ],
    });
    const outputs = view.slots.filter((s) => s.kind === 'tool_output');
    expect(outputs.map((s) => [s.toolName, s.callArgs])).toEqual([
      ['grep', { pattern: 'x' }],
      ['tool', {}],
    ]);
    expect(view.slots.find((s) => s.kind === 'tool_call')?.args).toEqual({ pattern: 'x' });
    expect(view.slots[0]).toMatchObject({ kind: 'instructions', text: 'sys', path: ['messages', 0, 'content'] });
  });

  it('reads a string Responses input as the user turn and instructions as a slot', () => {
    const view = readRequest({ instructions: 'be brief', input: 'what now?' });
    expect(view.slots.map((s) => [s.kind, s.path])).toEqual([
      ['instructions', ['instructions']],
      ['user', ['input']],
    ]);
  });

  it('reads Anthropic tool_result blocks inside user messages as tool outputs', () => {
    const view = readRequest({
      system: [{ type: 'text', text: 'rules' }],
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'bash', input: { command: 'ls' } }] },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 't1', content: 'a\nb' },
            { type: 'text', text: 'and?' },
          ],
        },
      ],
    });
    const out = view.slots.find((s) => s.kind === 'tool_output');
    expect(out).toMatchObject({
      toolName: 'bash',
      callArgs: { command: 'ls' },
      path: ['messages', 2, 'content', 0, 'content'],
      value: 'a\nb',
    });
    expect(view.itemInfo.map((i) => i.role)).toEqual(['user', 'assistant', 'tool']);
    expect(view.slots[0]).toMatchObject({ kind: 'instructions', path: ['system', 0, 'text'] });
  });

  it('passes unknown shapes through untouched', () => {
    const req = deepFreeze({ prompt: 'x', messages: 'not a list' });
    expect(readRequest(req).slots).toEqual([]);
    expect(writeSlots(req, [{ path: ['messages', 0, 'content'], value: 'y' }])).toBe(req);
  });
});

describe('writeSlots properties', () => {
  test.prop([formatAndRequest], { numRuns: 60 })(
    'writing every slot back unchanged yields a deep-equal request without mutating the frozen input',
    ({ format, request }) => {
      const req = deepFreeze(structuredClone(request));
      const before = structuredClone(req);
      const view = readRequest(req);
      expect(view.format).toBe(format);
      const out = writeSlots(
        req,
        view.slots.map((s) => ({ path: s.path, value: s.value })),
      );
      expect(out).toEqual(before);
      expect(req).toEqual(before);
    },
  );

  test.prop([formatAndRequest, fc.nat(), fc.string({ minLength: 1, maxLength: 8 })], { numRuns: 80 })(
    'a change to one slot changes exactly that place and shares everything else',
    ({ request }, pick, marker) => {
      const req = deepFreeze(structuredClone(request));
      const view = readRequest(req);
      const slot = view.slots[pick % view.slots.length]!;
      const value = `changed:${marker}`;
      const out = writeSlots(req, [{ path: slot.path, value }]);
      expect(valueAt(out, slot.path)).toBe(value);
      expect(diffPaths(req, out)).toEqual([JSON.stringify(slot.path)]);
      // Structural sharing: siblings of the changed item are the caller's own objects.
      const list = (req as Record<string, unknown>)[view.listKey ?? 'messages'];
      const outList = (out as Record<string, unknown>)[view.listKey ?? 'messages'];
      if (Array.isArray(list) && Array.isArray(outList) && slot.item !== undefined) {
        list.forEach((item, i) => {
          if (i !== slot.item) expect(outList[i]).toBe(item);
        });
      }
    },
  );
});
