import { describe, expect, it } from 'vitest';
import { firstOutput, type OutputScan } from '../../src/compile/references.js';
import type { Slot } from '../../src/model/types.js';

const slot = (value: string, item: number): Slot =>
  ({ kind: 'tool_output', path: ['messages', item, 'content'], item, value }) as unknown as Slot;

describe('firstOutput', () => {
  it('tests only the outputs a grown list adds, and finds the same first one as a full scan', () => {
    let tested = 0;
    const isDelta = (s: Slot): boolean => (tested++, (s.value as string).startsWith('delta'));
    const memo: { outputScan?: OutputScan } = {};
    const outputs = Array.from({ length: 1000 }, (_, i) => slot(`output ${i}`, i));
    expect(firstOutput(memo, outputs, isDelta)).toBe(-1);
    expect(tested).toBe(1000);
    // The next request: the same slots (a new array), and two new ones.
    tested = 0;
    const grown = [...outputs, slot('output 1000', 1000), slot('delta 1001', 1001)];
    expect(firstOutput(memo, grown, isDelta)).toBe(1001);
    expect(tested).toBe(2);
    // Grown again: the delta found before is among the shared outputs, nothing is tested.
    tested = 0;
    expect(firstOutput(memo, [...grown, slot('output 1002', 1002)], isDelta)).toBe(1001);
    expect(tested).toBe(0);
    // A list that differs from its start is scanned whole; another test never reuses the scan.
    expect(firstOutput(memo, [slot('output x', 0), ...outputs.slice(1)], isDelta)).toBe(-1);
    tested = 0;
    expect(firstOutput(memo, outputs, (s) => (tested++, s.item === 5))).toBe(5);
    expect(tested).toBe(6);
  });
});
