import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compactLines, compactText, OMITTED_MARKER, selectLines } from '../../src/compact/compact-text.js';
import { factorRuns, rangeTemplate } from '../../src/compact/factor.js';
import { splitLines, stripAnsi } from '../../src/compact/lines.js';
import { directoryGroups, renderGroups } from '../../src/compact/paths.js';
import { codePoints, createTiktokenCounter } from '../../src/measure/index.js';

const nativeFixture = (): string =>
  Array.from({ length: 12000 }, (_, i) => `src/module_${i % 40}.py:${i}: repeated match payload value=${i % 7}`).join(
    '\n',
  );

describe('compactText (reference parity, facts §2.2 golden vectors)', () => {
  it('collapses identical runs with the reference marker', () => {
    expect(compactText('start\n' + 'same\n'.repeat(20) + 'end\n', 2000)).toBe('start\nsame  [repeated \u00d720]\nend');
    expect(compactText('a\na\nb\nb\nb\n\u001b[31mred\u001b[0m\n', 2000)).toBe('a\na\nb  [repeated \u00d73]\nred');
  });

  it('cuts head/tail 72/28 by characters', () => {
    const text = Array.from({ length: 300 }, (_, i) => `line ${i} ${'x'.repeat(30)}`).join('\n');
    const out = compactText(text, 1000);
    expect(out).toHaveLength(1000);
    expect(out.startsWith('line 0 ')).toBe(true);
    expect(out).toContain(OMITTED_MARKER);
    expect(out.endsWith(`line 299 ${'x'.repeat(30)}`)).toBe(true);
    const flat = compactText('x'.repeat(20000), 1000);
    expect(flat).toHaveLength(1000);
    expect(flat).toContain(`\n${OMITTED_MARKER}\n`);
    expect(compactText('x'.repeat(100), 10)).toBe('\u2026 lines om');
  });

  it('reproduces the benchmark native case: 4,000 chars compact, head 2,866, tail 1,115', () => {
    const out = compactText(nativeFixture(), 4000);
    expect(out).toHaveLength(4000);
    const [head, tail] = out.split(`\n${OMITTED_MARKER}\n`);
    expect(head).toHaveLength(2866);
    expect(tail).toHaveLength(1115);
  });

  it('counts code points, not UTF-16 units', () => {
    const out = compactText('😀'.repeat(3000), 100);
    expect(codePoints(out)).toBe(100);
    expect(out).not.toMatch(/[\ud800-\udbff](?![\udc00-\udfff])/);
  });

  it('splits lines like Python splitlines', () => {
    expect(splitLines('a\r\nb\rc\u2028d\n')).toEqual(['a', 'b', 'c', 'd']);
    expect(splitLines('')).toEqual([]);
    expect(splitLines('\n')).toEqual(['']);
    expect(stripAnsi('\u001b[1;31mx\u001b[0m')).toBe('x');
  });
});

describe('factorRuns and compactLines (improved line mode)', () => {
  it('factors lines that differ only in numbers into a template with ranges and a count', () => {
    const lines = Array.from({ length: 100 }, (_, i) => `-original value ${String(i).padStart(5, '0')}`);
    expect(factorRuns(lines)).toEqual([
      '-original value 00000',
      '\u2026 \u00d798 more lines of the form "-original value {00001..00098}" \u2026',
      '-original value 00099',
    ]);
    expect(rangeTemplate(['a 1 b 7', 'a 3 b 7', 'a 2 b 7'])).toBe('a {1..3} b 7');
    expect(factorRuns(['x', 'x', 'x', 'y'])).toEqual(['x  [repeated \u00d73]', 'y']);
    expect(factorRuns(['v1', 'v2', 'v3', 'v4'])).toEqual(['v1', 'v2', 'v3', 'v4']);
  });

  it('cuts only on line boundaries and keeps error lines from the middle', () => {
    const lines = Array.from(
      { length: 2000 },
      (_, i) => `step ${i} ok ${'·'.repeat(i % 13)} ${String.fromCharCode(97 + (i % 26))}`,
    );
    lines[1234] = 'ERROR: disk quota exceeded on /var/data';
    lines[777] = 'warning: deprecated flag --foo';
    const text = lines.join('\n');
    const out = compactLines(text, { maxChars: 3000 });
    expect(codePoints(out)).toBeLessThanOrEqual(3000);
    expect(out).toContain('ERROR: disk quota exceeded on /var/data');
    expect(out).toContain('warning: deprecated flag --foo');
    expect(out).toMatch(/… \d+ lines omitted …/);
    const kept = splitLines(out).filter((l) => !l.startsWith('\u2026'));
    for (const line of kept) expect(lines).toContain(line);
  });

  it('makes the benchmark native case tiny: one template line for 11,998 same-shape lines', () => {
    const out = compactLines(nativeFixture(), { maxChars: 4000 });
    expect(out.split('\n')).toEqual([
      'src/module_0.py:0: repeated match payload value=0',
      '\u2026 \u00d711998 more lines of the form "src/module_{0..39}.py:{1..11998}: repeated match payload value={0..6}" \u2026',
      'src/module_39.py:11999: repeated match payload value=1',
    ]);
  });

  it('selectLines returns the text unchanged when it fits', () => {
    expect(selectLines(['a', 'b'], 100)).toBe('a\nb');
  });

  it('groups paths by directory with exact counts', () => {
    expect(renderGroups(directoryGroups(['a/x.ts', 'a/y.ts', 'b/z.ts', 'lib/']), 1)).toEqual([
      'a/ (2): x.ts \u2026(+1 more)',
      'b/z.ts',
      'lib/',
    ]);
  });

  it('property: line mode never invents a line and stays within budget for bounded lines', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.constantFrom('ok', 'ok', 'error: boom', 'FAILED x'),
            fc
              .string({ maxLength: 60 })
              .map((s) => s.replace(/[\r\n\u000b\u000c\u001c-\u001e\u0085\u2028\u2029]/g, '')),
          ),
          { maxLength: 400 },
        ),
        (lines) => {
          const text = lines.join('\n');
          const out = compactLines(text, { maxChars: 1000 });
          expect(codePoints(out)).toBeLessThanOrEqual(Math.max(1000, codePoints(text)));
          const source = new Set(splitLines(text));
          for (const line of splitLines(out)) {
            if (line.startsWith('\u2026 ') || line.includes('  [repeated \u00d7')) continue;
            expect(source.has(line)).toBe(true);
          }
        },
      ),
      { numRuns: 100 },
    );
  });

  it('the benchmark native case in reference mode is 4,145 chars and 1,213 o200k tokens with its note', () => {
    const counter = createTiktokenCounter('o200k_base');
    const compact = compactText(nativeFixture(), 4000);
    const output = `${compact.trimEnd()}\n\n[Token Terminator: 99.4% fewer characters; full artifact=a_62f66fb1a6d11156293950a7e0add39a; recover with token_terminator action=artifact_get]`;
    expect(output).toHaveLength(4145);
    expect(counter.count(output)).toBe(1213);
    counter.dispose?.();
  });
});

describe('selectLines: repeated lines', () => {
  it('head and tail skip a line the view already shows, so the room goes to lines not seen yet', () => {
    const frames = Array.from(
      { length: 12 },
      (_, k) => `  File "/src/app/module_${k}.py", line ${100 + k}, in step_${k}`,
    );
    const blocks = Array.from({ length: 8 }, (_, b) => [`Call number ${b} of convert_units`, ...frames]).flat();
    const inner = '    self.converter = registry.get_converter(value)';
    const lines = [...blocks.slice(0, 50), inner, ...blocks.slice(50)];
    const view = selectLines(lines, 1600);
    expect(view).toContain(inner);
    expect(view.length).toBeLessThanOrEqual(1600);
    // Each repeated frame is shown once at most in the head.
    expect(view.split('\n').filter((l) => l === frames[0]).length).toBeLessThanOrEqual(2);
  });
});
