import { describe, expect, it } from 'vitest';
import { namedLines } from '../../src/window/plan.js';

describe('namedLines', () => {
  const text = ['def parse_header(raw):', '    return raw', 'def main():', '    parse_header(x)', '    return 0'].join(
    '\n',
  );

  it('keeps the lines holding a word the agent named', () => {
    const keep = namedLines(text, new Set(['parse_header']));
    expect(text.split('\n').filter(keep)).toEqual(['def parse_header(raw):', '    parse_header(x)']);
  });

  it('keeps no line for a word most of the output holds', () => {
    const many = Array.from({ length: 10 }, (_, i) => `self.value${i} = compute(${i})`).join('\n');
    const keep = namedLines(many, new Set(['compute']));
    expect(many.split('\n').filter(keep)).toEqual([]);
  });
});
