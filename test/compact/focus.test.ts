import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import { compactTerminal } from '../../src/compact/index.js';
import { FOCUS_MARKER, focusLines, focusTerms, withFocusLines } from '../../src/compact/focus.js';
import { fixture } from '../operators/tool-helpers.js';

describe('focusTerms', () => {
  it('takes names of a telling shape with their parts and CamelCase runs, backticked words, latest last', () => {
    const terms = focusTerms([
      'fix the `AtomicReference` serializer in src/main/java/com/x/ReferenceTypeSerializer.java',
      'then run parse_config and createArrayDeserializer',
    ]);
    for (const t of [
      'AtomicReference',
      'src/main/java/com/x/ReferenceTypeSerializer.java',
      'ReferenceTypeSerializer',
      'ReferenceType',
      'TypeSerializer',
      'parse_config',
      'createArrayDeserializer',
      'ArrayDeserializer',
    ])
      expect(terms, t).toContain(t);
    for (const t of ['serializer', 'then', 'run', 'the', 'java']) expect(terms, t).not.toContain(t);
    expect(terms.at(-1)).toBe('ArrayDeserializer');
    // At most `max`, the oldest dropped.
    expect(focusTerms(['AlphaBeta GammaDelta EpsilonZeta'], 2)).toEqual(['GammaDelta', 'EpsilonZeta']);
  });
});

describe('focusLines', () => {
  const listing = Array.from({ length: 400 }, (_, i) => `src/test/java/com/acme/pkg${i % 20}/Case${i}Test.java`);
  listing[317] = 'src/test/java/com/acme/pkg17/TestBeanDeserializer.java';
  const output = listing.join('\n');

  it('keeps the lines that mention a term and are not in the view, in output order', () => {
    const view = listing.slice(0, 10).join('\n');
    expect(focusLines(output, view, ['BeanDeserializer', 'Case123Test'])).toEqual([
      'src/test/java/com/acme/pkg3/Case123Test.java',
      'src/test/java/com/acme/pkg17/TestBeanDeserializer.java',
    ]);
    // Already shown: nothing to add.
    expect(
      focusLines(output, `${view}\n${listing[123]}\n${listing[317]}`, ['BeanDeserializer', 'Case123Test']),
    ).toEqual([]);
  });

  it('ignores a term found on more than an eighth of the lines: it tells nothing', () => {
    expect(focusLines(output, '', ['acme'])).toEqual([]);
    expect(focusLines(output, '', ['acme', 'BeanDeserializer'])).toEqual([listing[317]]);
  });

  test.prop(
    [
      fc.array(fc.constantFrom('Case1', 'Case2', 'pkg7', 'Case19', 'BeanDeserializer', 'nothing'), { maxLength: 6 }),
      fc.integer({ min: 1, max: 12 }),
      fc.integer({ min: 20, max: 600 }),
    ],
    { numRuns: 60 },
  )('returns distinct whole lines of the output within the budget', (terms, maxLines, maxChars) => {
    const lines = focusLines(output, '', terms, { maxLines, maxChars });
    expect(lines.length).toBeLessThanOrEqual(maxLines);
    expect(lines.reduce((n, l) => n + l.length + 1, 0)).toBeLessThanOrEqual(maxChars);
    expect(new Set(lines).size).toBe(lines.length);
    for (const l of lines) {
      expect(listing).toContain(l);
      expect(terms.some((t) => l.includes(t))).toBe(true);
    }
  });

  it('withFocusLines appends them after a marker, and leaves a view without any unchanged', () => {
    const view = compactTerminal({ command: 'find src/test -name "*.java"', output }).text;
    expect(view).not.toContain(listing[317]);
    const focused = withFocusLines(view, output, ['BeanDeserializer']);
    expect(focused).toBe(`${view}\n${FOCUS_MARKER}\n${listing[317]}`);
    expect(withFocusLines(view, output, ['NoSuchName'])).toBe(view);
  });

  it('on a real captured listing, a grouped view gains the full path of the file a term names', () => {
    const raw = fixture('find.txt');
    const line = raw.split('\n').find((l) => l.endsWith('/mergeMap.ts'))!;
    const view = compactTerminal({ command: 'find src -type f', output: raw }).text;
    expect(view).not.toContain(line);
    const focused = withFocusLines(view, raw, focusTerms(['the `mergeMap` operator: look at mergeInternals']));
    expect(focused.slice(view.length).split('\n')).toEqual([
      '',
      FOCUS_MARKER,
      'src/internal/operators/mergeInternals.ts',
      line,
      'src/internal/operators/mergeMapTo.ts',
    ]);
  });
});
