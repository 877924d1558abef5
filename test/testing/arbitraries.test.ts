import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { codePoints } from '../../src/measure/index.js';
import {
  anthropicRequest,
  chatRequest,
  conversationItems,
  growingSession,
  prefixBreak,
  requestFormat,
  responsesRequest,
  roleProblems,
  skillCatalog,
  toolEventPair,
  toolOutput,
  toolResultStream,
  type WireFormat,
} from '../../src/testing/index.js';

type Msg = Record<string, unknown>;
const blocks = (m: Msg): Msg[] => (Array.isArray(m['content']) ? (m['content'] as Msg[]) : []);
const sample = <V>(arb: fc.Arbitrary<V>, n: number, seed = 7): V[] => fc.sample(arb, { numRuns: n, seed });

describe('tool output arbitraries', () => {
  it('spans tiny to over 12,000 chars and includes astral characters and repeated lines', () => {
    const texts = sample(toolOutput(), 300);
    expect(texts.some((t) => t.length < 300)).toBe(true);
    expect(texts.some((t) => t.length > 12_000)).toBe(true);
    expect(texts.some((t) => codePoints(t) < t.length)).toBe(true); // surrogate pairs present
    expect(texts.some((t) => /^(.+)\n\1\n\1$/mu.test(t))).toBe(true); // three identical consecutive lines
  });

  it('gives each shape its realistic line format', () => {
    const [search] = sample(toolOutput({ shapes: ['search'], sizes: ['medium'] }), 1);
    expect(search!.split('\n').every((l) => /^[\w./-]+:\d+:/u.test(l))).toBe(true);
    const [file] = sample(toolOutput({ shapes: ['file'], sizes: ['medium'] }), 1);
    expect(file!.split('\n')[0]).toMatch(/^ {5}1\|/u);
    for (const json of sample(toolOutput({ shapes: ['json'] }), 20)) expect(() => JSON.parse(json)).not.toThrow();
  });

  it('rejects empty shape lists when built', () => {
    expect(() => toolOutput({ shapes: [] })).toThrow(/toolOutput/u);
  });
});

describe('tool event arbitraries', () => {
  it('pairs a call with a result of the same id, name and args', () => {
    for (const { call, result } of sample(toolEventPair(), 50)) {
      expect([result.callId, result.name, result.args]).toEqual([call.id, call.name, call.args]);
      if (call.name === 'terminal') expect(typeof call.args['command']).toBe('string');
    }
  });

  it('repeats earlier observations exactly and with edits', () => {
    const streams = sample(toolResultStream({ maxLength: 8 }), 100);
    const exact = streams.some((s) =>
      s.some((r, i) => s.slice(0, i).some((p) => p.content === r.content && p.name === r.name)),
    );
    const edited = streams.some((s) =>
      s.some((r) => r.content.endsWith('(changed)') || r.content.includes('(changed)\n')),
    );
    expect(exact).toBe(true);
    expect(edited).toBe(true);
    for (const s of streams) expect(new Set(s.map((r) => r.callId)).size).toBe(s.length);
  });
});

describe('request arbitraries', () => {
  const cases: [WireFormat, fc.Arbitrary<Record<string, unknown>>][] = [
    ['chat', chatRequest()],
    ['responses', responsesRequest()],
    ['anthropic', anthropicRequest()],
  ];

  it.each(cases)('%s requests are valid for their format and detected as it', (format, arb) => {
    for (const request of sample(arb, 60)) {
      expect(requestFormat(request)).toBe(format);
      expect(roleProblems(request, format)).toEqual([]);
    }
  });

  it('anthropic requests alternate and answer every tool_use in the next user message, tool_result first', () => {
    for (const request of sample(anthropicRequest(), 80)) {
      const messages = request['messages'] as Msg[];
      expect(typeof request['max_tokens']).toBe('number');
      messages.forEach((m, i) => {
        expect(m['role']).toBe(i % 2 === 0 ? 'user' : 'assistant');
        const uses = blocks(m).filter((b) => b['type'] === 'tool_use');
        if (uses.length === 0) return;
        const next = messages[i + 1];
        expect(next?.['role']).toBe('user');
        const results = blocks(next!).map((b) => (b['type'] === 'tool_result' ? b['tool_use_id'] : undefined));
        expect(results.slice(0, uses.length)).toEqual(uses.map((u) => u['id']));
      });
    }
  });

  it('chat tool messages directly follow the assistant message that called them', () => {
    for (const request of sample(chatRequest(), 80)) {
      const messages = request['messages'] as Msg[];
      messages.forEach((m, i) => {
        if (m['role'] !== 'tool') return;
        let j = i - 1;
        while (messages[j]?.['role'] === 'tool') j -= 1;
        const ids = ((messages[j]?.['tool_calls'] ?? []) as Msg[]).map((c) => c['id']);
        expect(ids).toContain(m['tool_call_id']);
        expect(typeof (messages[j]!['tool_calls'] as Msg[])[0]!['function']).toBe('object');
      });
    }
  });

  it('responses function_call_output items follow their function_call', () => {
    for (const request of sample(responsesRequest(), 80)) {
      const items = request['input'] as Msg[];
      items.forEach((item, i) => {
        if (item['type'] !== 'function_call_output') return;
        expect(items.slice(0, i).some((p) => p['type'] === 'function_call' && p['call_id'] === item['call_id'])).toBe(
          true,
        );
      });
    }
  });

  it('includes duplicate tool outputs, large outputs, multimodal parts and skill catalogs', () => {
    const requests = sample(chatRequest(), 200);
    const outputs = (r: Msg) =>
      (r['messages'] as Msg[]).filter((m) => m['role'] === 'tool').map((m) => m['content'] as string);
    expect(requests.some((r) => new Set(outputs(r)).size < outputs(r).length)).toBe(true);
    expect(requests.some((r) => outputs(r).some((o) => o.length > 12_000))).toBe(true);
    expect(
      requests.some((r) => (r['messages'] as Msg[]).some((m) => blocks(m).some((b) => b['type'] === 'image_url'))),
    ).toBe(true);
    expect(requests.some((r) => JSON.stringify(r).includes('<available_skills>'))).toBe(true);
  });

  it('prints a short summary as its counterexample', () => {
    const [request] = sample(chatRequest(), 1);
    expect(fc.stringify(request)).toMatch(/^chat request: /u);
  });
});

describe('growing sessions', () => {
  it('each request extends the previous one, in one format', () => {
    for (const session of sample(growingSession(), 60)) {
      expect(session.length).toBeGreaterThanOrEqual(2);
      const format = requestFormat(session[0]!);
      for (let i = 1; i < session.length; i++) {
        expect(requestFormat(session[i]!)).toBe(format);
        expect(prefixBreak(session[i - 1]!, session[i]!)).toBeUndefined();
        expect(conversationItems(session[i]!).length).toBeGreaterThan(conversationItems(session[i - 1]!).length);
        expect(roleProblems(session[i]!)).toEqual([]);
      }
    }
  });
});

describe('text-protocol sessions', () => {
  it('one fenced bash block per assistant step, its output in the next user message in the observation template, no tools, valid roles', () => {
    const formats = new Set<string>();
    for (const session of sample(growingSession({ protocol: 'text' }), 40)) {
      const last = session.at(-1)!;
      formats.add(String(requestFormat(last)));
      expect(last['tools']).toBeUndefined();
      expect(roleProblems(last)).toEqual([]);
      const items = conversationItems(last) as Msg[];
      const text = (m: Msg): string =>
        typeof m['content'] === 'string'
          ? m['content']
          : blocks(m)
              .map((b) => String(b['text']))
              .join('');
      items.forEach((m, i) => {
        if (m['role'] !== 'user' || !text(m).startsWith('<returncode>')) return;
        expect(text(m)).toMatch(/^<returncode>[01]<\/returncode>\n<output>\n[\s\S]*\n<\/output>$/);
        expect(items[i - 1]!['role']).toBe('assistant');
        expect(text(items[i - 1]!)).toMatch(/\n```bash\n[^\n][\s\S]*\n```$/);
      });
      expect(session.every((r) => !JSON.stringify(r).includes('tool_call'))).toBe(true);
    }
    expect([...formats].sort()).toEqual(['anthropic', 'chat', 'responses']);
    // 'both' draws either protocol.
    const kinds = new Set(
      sample(growingSession({ protocol: 'both' }), 40).map((s) =>
        s.at(-1)!['tools'] === undefined ? 'text' : 'tools',
      ),
    );
    expect([...kinds].sort()).toEqual(['text', 'tools']);
  });
});

describe('skill catalogs', () => {
  it('renders categories and "- name: description" lines inside <available_skills>', () => {
    for (const { block, entries } of sample(skillCatalog({ minSkills: 8 }), 20)) {
      const lines = block.split('\n');
      expect(lines[0]).toBe('<available_skills>');
      expect(lines[lines.length - 1]).toBe('</available_skills>');
      const named = lines.filter((l) => l.trimStart().startsWith('- ')).map((l) => l.trim().slice(2).split(': ')[0]);
      expect(named).toEqual(expect.arrayContaining(entries.map((e) => e.name)));
      expect(named).toHaveLength(entries.length);
      expect(lines.filter((l) => /^ {2}\S.*:$/u.test(l)).length).toBe(new Set(entries.map((e) => e.category)).size);
    }
  });
});

describe('role validation', () => {
  it('flags the role errors providers reject', () => {
    const orphanTool = {
      model: 'm',
      messages: [
        { role: 'user', content: 'x' },
        { role: 'tool', tool_call_id: 'c1', content: 'y' },
      ],
    };
    expect(roleProblems(orphanTool)).toEqual([
      'messages[1] (tool) answers no pending tool call of the preceding assistant message',
    ]);
    const unanswered = {
      max_tokens: 10,
      messages: [
        { role: 'user', content: 'x' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'n', input: {} }] },
        { role: 'user', content: 'no result' },
      ],
    };
    expect(roleProblems(unanswered, 'anthropic')).toEqual(['messages[2] does not answer tool_use t1 of messages[1]']);
    const twoUsers = {
      max_tokens: 10,
      system: 's',
      messages: [
        { role: 'user', content: 'a' },
        { role: 'user', content: 'b' },
      ],
    };
    expect(roleProblems(twoUsers)).toEqual(['messages[1] is user where alternation needs assistant']);
    const orphanOutput = { input: [{ type: 'function_call_output', call_id: 'x', output: 'o' }] };
    expect(roleProblems(orphanOutput)).toEqual(['input[0] (function_call_output) answers no earlier function_call']);
  });
});
