import { readdirSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { excerptLargeOutput, LARGE_OUTPUT_CHARS, WINDOW_CHARS } from '../../src/compact/large-output.js';
import { splitLines } from '../../src/compact/lines.js';
import { countInSlices, SLICE_CHARS, sliceBoundaries, yieldSlice } from '../../src/compact/slices.js';
import { createTiktokenCounter } from '../../src/measure/index.js';
import { FIXTURES, fixture } from '../operators/tool-helpers.js';

const counter = createTiktokenCounter('o200k_base');
afterAll(() => counter.dispose?.());

describe('counting in slices', () => {
  it('adds up to the whole count on every captured fixture, and on a large real log at the default slice size', async () => {
    for (const name of readdirSync(FIXTURES).filter((f) => f.endsWith('.txt'))) {
      const text = fixture(name);
      expect(await countInSlices(counter, text, undefined, 4000), name).toBe(counter.count(text));
    }
    const log = fixture('pytest-assert-fail.txt').repeat(40) + fixture('mvn-test-fail.txt').repeat(20);
    expect(sliceBoundaries(log).length).toBeGreaterThan(10);
    expect(await countInSlices(counter, log)).toBe(counter.count(log));
  });

  it('cuts after a newline followed by a non-space, never inside a surrogate pair', () => {
    const text = `${'a'.repeat(50)}\n  indented\n${'😀'.repeat(40)}\nnext line\n${'b'.repeat(120)}`;
    for (const cut of sliceBoundaries(text, 40)) {
      const c = text.charCodeAt(cut);
      expect(c >= 0xdc00 && c <= 0xdfff).toBe(false);
    }
    const cuts = sliceBoundaries(`${'x'.repeat(SLICE_CHARS)}\n  y\nz${'w'.repeat(SLICE_CHARS)}`);
    expect(cuts[0]).toBe(SLICE_CHARS + 5);
  });

  it('yields a macrotask turn and rejects once the signal aborted', async () => {
    const order: string[] = [];
    setImmediate(() => order.push('macrotask'));
    await yieldSlice();
    order.push('after');
    expect(order).toEqual(['macrotask', 'after']);
    const controller = new AbortController();
    const pending = yieldSlice(controller.signal);
    controller.abort(new Error('stop'));
    await expect(pending).rejects.toThrow('stop');
  });
});

describe('excerpts of large outputs', () => {
  const log = (): string => {
    const pass = splitLines(fixture('pytest-assert-fail.txt')).filter((l) => l.includes(' PASSED'));
    const lines = Array.from({ length: 12_000 }, (_, i) => pass[i % pass.length]!);
    lines[6000] = 'E       AssertionError: the one failure in the middle';
    lines[6001] = 'FAILED tests/test_mid.py::test_mid - AssertionError: the one failure in the middle';
    return lines.join('\n');
  };

  it('keep the head and tail windows and the diagnostic lines of the middle, with gap markers, in bounded size', async () => {
    const text = log();
    expect(text.length).toBeGreaterThan(LARGE_OUTPUT_CHARS);
    const excerpt = await excerptLargeOutput(text);
    const lines = splitLines(excerpt.text);
    expect(excerpt.text.startsWith(text.slice(0, 1000))).toBe(true);
    expect(excerpt.text.endsWith(text.slice(-1000))).toBe(true);
    expect(lines).toContain('E       AssertionError: the one failure in the middle');
    expect(lines).toContain('FAILED tests/test_mid.py::test_mid - AssertionError: the one failure in the middle');
    expect(lines.some((l) => /^… \d+ lines omitted …$/.test(l))).toBe(true);
    expect(excerpt.text.length).toBeLessThan(2 * WINDOW_CHARS + 20_000);
    expect(excerpt.omittedLines).toBeGreaterThan(5000);
  });

  it('read only head and tail when told not to scan the middle', async () => {
    const excerpt = await excerptLargeOutput(log(), { scanMiddle: false });
    expect(excerpt.middleScanned).toBe(false);
    expect(excerpt.text).not.toContain('the one failure in the middle');
    expect(excerpt.text).toMatch(/… \d+ chars omitted …/);
  });

  it('stop at the next slice once aborted', async () => {
    const controller = new AbortController();
    const pending = excerptLargeOutput(log(), { signal: controller.signal });
    controller.abort(new Error('aborted by the host'));
    await expect(pending).rejects.toThrow('aborted by the host');
  });
});
