import { fc, test } from '@fast-check/vitest';
import type { AgentInputItem } from '@openai/agents';
import { describe, expect, it } from 'vitest';
import { CapLedger } from '../../../adapters/openai-agents/cap-ledger.js';
import { fromResponsesInput, outputText, toResponsesInput } from '../../../adapters/openai-agents/items.js';

const history = fc.array(fc.string(), { minLength: 1, maxLength: 6 }).map((outputs) =>
  outputs.flatMap(
    (out, i) =>
      [
        { type: 'message', role: 'user', content: `q${i}` },
        { type: 'function_call', callId: `c${i}`, name: 'search', arguments: '{}', status: 'completed', id: `fc${i}` },
        {
          type: 'function_call_result',
          callId: `c${i}`,
          name: 'search',
          status: 'completed',
          output: { type: 'text', text: out },
        },
      ] as AgentInputItem[],
  ),
);

describe('Agents SDK items ↔ Responses input', () => {
  test.prop([history], { numRuns: 50 })(
    'renames calls and results to wire form and maps untouched items back by identity',
    (items) => {
      const frozen = structuredClone(items);
      const conversion = toResponsesInput(items);
      for (const wire of conversion.input)
        expect(['message', 'function_call', 'function_call_output']).toContain(wire['type']);
      expect(
        conversion.input
          .filter((w) => w['type'] === 'function_call_output')
          .every((w) => typeof w['output'] === 'string' && typeof w['call_id'] === 'string'),
      ).toBe(true);
      const back = fromResponsesInput(conversion.input, conversion);
      back.forEach((item, i) => expect(item).toBe(items[i]));
      expect(items).toEqual(frozen);
    },
  );

  test.prop([history, fc.nat()], { numRuns: 50 })(
    'rebuilds a changed output from its SDK item, keeping name and status',
    (items, pick) => {
      const conversion = toResponsesInput(items);
      const outputs = conversion.input.filter((w) => w['type'] === 'function_call_output');
      const target = outputs[pick % outputs.length]!;
      const back = fromResponsesInput(
        conversion.input.map((w) => (w === target ? { ...w, output: 'RECEIPT' } : w)),
        conversion,
      );
      const rebuilt = back.find((b) => (b as { output?: { text?: string } }).output?.text === 'RECEIPT') as Record<
        string,
        unknown
      >;
      expect(rebuilt).toMatchObject({
        type: 'function_call_result',
        callId: target['call_id'],
        name: 'search',
        status: 'completed',
      });
    },
  );

  it('reads text outputs in every SDK form and refuses non-text ones', () => {
    expect(outputText('a')).toBe('a');
    expect(outputText({ type: 'text', text: 'b' })).toBe('b');
    expect(
      outputText([
        { type: 'input_text', text: 'c' },
        { type: 'text', text: 'd' },
      ]),
    ).toBe('cd');
    expect(outputText({ type: 'image', image: 'x' })).toBeUndefined();
  });
});

describe('CapLedger', () => {
  it('hands a cap to a structurally equal (cloned) item list once', () => {
    const ledger = new CapLedger();
    const items = [{ type: 'message', role: 'user', content: 'hi' }];
    ledger.record(items, 123);
    expect(ledger.take(structuredClone(items))?.cap).toBe(123);
    expect(ledger.take(structuredClone(items))).toBeUndefined();
  });

  it('does not hand a cap to a different list', () => {
    const ledger = new CapLedger();
    ledger.record([{ a: 1 }], 5);
    expect(ledger.take([{ a: 2 }])).toBeUndefined();
    expect(ledger.take([{ a: 0 }, { a: 1 }])).toBeUndefined();
  });
});
