/**
 * Counting a near-copy of a counted text by its pieces (src/measure/pieces.ts) gives exactly the
 * count of the text itself, and the shared measurement memo's spaced segments (telemetry) are
 * exactly tiktoken's counts of those texts while their copied part is not encoded again.
 */
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import {
  createItemMeasures,
  NOTED_FROM,
  spacedAlong,
  spacedFromCompact,
  spacesIn,
  spacedRuns,
} from '../../src/ledger/item-measures.js';
import { countInSlices, recordInSlices } from '../../src/compact/slices.js';
import { jsonString, stringRuns } from '../../src/measure/canonical-json.js';
import {
  acquireEncoder,
  canonicalJson,
  codePoints,
  createTiktokenCounter,
  TIKTOKEN_ENCODINGS,
  type EncoderLease,
} from '../../src/measure/index.js';
import { pieceCounting, type CopiedRun, type PieceRecord } from '../../src/measure/pieces.js';
import { SPLIT_FLAGS, SPLIT_PATTERNS } from '../../src/measure/encoders.js';
import { createMessagesMeter } from '../../src/ledger/messages-meter.js';
import { longRun, tokenizerText } from './tokenizer-text.js';

const RUNS = 150;
const leases: EncoderLease[] = [];
afterAll(() => {
  for (const l of leases) l.release();
});

/** `text` with each insert's string put before its position, and the runs the result copies from `text`. */
function edited(text: string, inserts: readonly (readonly [number, string])[]): { target: string; runs: CopiedRun[] } {
  const sorted = inserts.map(([p, s]) => [Math.min(p, text.length), s] as const).sort((a, b) => a[0] - b[0]);
  let target = '';
  const runs: CopiedRun[] = [];
  let from = 0;
  for (const [p, s] of [...sorted, [text.length, ''] as const]) {
    if (p > from) runs.push({ at: target.length, from, length: p - from });
    target += text.slice(from, p) + s;
    from = p;
  }
  return { target, runs };
}

describe.each(TIKTOKEN_ENCODINGS)('piece counting (%s)', (encoding) => {
  const js = acquireEncoder(encoding, 'js');
  const wasm = acquireEncoder(encoding, 'wasm');
  leases.push(js, wasm);

  it('record and derive count exactly like the reference, whatever was inserted where', () => {
    const edit = fc.array(
      fc.tuple(fc.nat(400), fc.oneof(fc.constantFrom(' ', ',', ': ', '\n', '"', '['), tokenizerText)),
      {
        maxLength: 8,
      },
    );
    fc.assert(
      fc.property(tokenizerText, edit, (text, inserts) => {
        const source = js.pieces!.record(text);
        if (source === undefined) return; // a lone surrogate: the plain count takes it
        expect(source.total).toBe(wasm.count(text));
        const { target, runs } = edited(text, inserts);
        const derived = js.pieces!.derive(target, source, runs);
        if (derived !== undefined) expect(derived.total).toBe(wasm.count(target));
      }),
      { numRuns: RUNS },
    );
  });

  it("cuts exactly where the pre-tokenizer does: the pieces are the split pattern's matches, in order", () => {
    const split = new RegExp(SPLIT_PATTERNS[encoding], SPLIT_FLAGS);
    fc.assert(
      fc.property(tokenizerText, (text) => {
        const record = js.pieces!.record(text);
        if (record === undefined) return;
        const cuts = [0];
        for (const piece of text.match(split) ?? []) cuts.push(cuts.at(-1)! + piece.length);
        expect([...record.starts]).toEqual(text.length === 0 ? [0] : cuts);
      }),
      { numRuns: RUNS },
    );
  });

  it('encodes only the pieces around an edit', () => {
    const encoded: string[] = [];
    const core = acquireEncoder(encoding, 'js');
    leases.push(core);
    const engine = pieceCounting({
      split: new RegExp(SPLIT_PATTERNS[encoding], SPLIT_FLAGS),
      countPiece: (piece) => {
        encoded.push(piece);
        return core.count(piece);
      },
    });
    const text = Array.from({ length: 400 }, (_, i) => `line ${i}: value_${i} = compute(${i});`).join('\\n');
    const source = engine.record(text)!;
    const pieces = encoded.length;
    expect(pieces).toBeGreaterThan(2000);
    encoded.length = 0;
    const { target, runs } = edited(text, [[text.length / 2, ', ']]);
    expect(engine.derive(target, source, runs)!.total).toBe(wasm.count(target));
    expect(encoded.length).toBeLessThan(6); // not ~pieces
  });
});

describe('spacedRuns', () => {
  it('says exactly where spacedFromCompact copies its input', () => {
    const value = fc.jsonValue({ maxDepth: 3 });
    fc.assert(
      fc.property(value, (v) => {
        const compact = canonicalJson(v, { compact: true });
        const spaced = spacedFromCompact(compact);
        const runs = spacedRuns(compact);
        let covered = 0;
        for (const r of runs) {
          expect(spaced.slice(r.at, r.at + r.length)).toBe(compact.slice(r.from, r.from + r.length));
          covered += r.length;
        }
        expect(covered).toBe(compact.length);
        // Everything else is one inserted space per run boundary.
        expect(spaced.length - compact.length).toBe(runs.length - 1);
      }),
      { numRuns: 300 },
    );
  });
});

describe('spacesIn', () => {
  it('counts the spaces spacedFromCompact inserts, so an entry is sized from its compact JSON alone', () => {
    // Strings full of separators, quotes and escapes: the count must skip exactly the string literals.
    const tricky = fc.string({ unit: fc.constantFrom(',', ':', '"', '\\', ' ', 'a', '\n', '\u{1F600}') });
    const value = fc.oneof(
      fc.jsonValue({ maxDepth: 3 }),
      fc.dictionary(tricky, fc.oneof(tricky, fc.array(tricky, { maxLength: 4 }))),
    );
    fc.assert(
      fc.property(value, (v) => {
        const compact = canonicalJson(v, { compact: true });
        expect(spacesIn(compact)).toBe(spacedFromCompact(compact).length - compact.length);
        expect(codePoints(compact) + spacesIn(compact)).toBe(codePoints(canonicalJson(v)));
      }),
      { numRuns: 300 },
    );
  });
});

describe('spacedAlong', () => {
  // Near misses of the spaced JSON: a space dropped, added or moved, a character changed.
  const nearMiss = (spaced: string, at: number, kind: number): string => {
    const p = spaced.length === 0 ? 0 : at % spaced.length;
    if (kind === 0) return spaced.slice(0, p) + spaced.slice(p + 1);
    if (kind === 1) return `${spaced.slice(0, p)} ${spaced.slice(p)}`;
    if (kind === 2) return `${spaced.slice(0, p)}${spaced[p] === 'x' ? 'y' : 'x'}${spaced.slice(p + 1)}`;
    const i = spaced.indexOf(' ', p);
    return i < 0 ? `${spaced} ` : `${spaced.slice(0, i)}${spaced.slice(i + 1, i + 2)} ${spaced.slice(i + 2)}`;
  };

  it('is true exactly when the text is spacedFromCompact of the compact JSON', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 3 }), fc.nat(), fc.nat(3), fc.boolean(), (v, at, kind, exact) => {
        const compact = canonicalJson(v, { compact: true });
        const spaced = spacedFromCompact(compact);
        const json = exact ? spaced : nearMiss(spaced, at, kind);
        expect(spacedAlong(json, compact, spacedRuns(compact))).toBe(json === spaced);
      }),
      { numRuns: 500 },
    );
  });

  it('says no to a text with the right length and cuts but other bytes in a cut', () => {
    const compact = '{"a":[1,2]}';
    expect(spacedFromCompact(compact)).toBe('{"a": [1, 2]}');
    expect(spacedAlong('{"a": [1, 2]}', compact, spacedRuns(compact))).toBe(true);
    expect(spacedAlong('{"a":\t[1, 2]}', compact, spacedRuns(compact))).toBe(false);
    expect(spacedAlong('{"a": [1,  2]', compact, spacedRuns(compact))).toBe(false);
    expect(spacedAlong('{"a": [1, 2]} ', compact, spacedRuns(compact))).toBe(false);
  });
});

/** A js counter whose calls are logged by kind: plain counts, recorded counts, derived counts. */
function spyCounter() {
  const counter = createTiktokenCounter('o200k_base', { engine: 'js' });
  const calls = { plain: [] as string[], recorded: [] as string[], derived: [] as string[] };
  const spy = {
    ...counter,
    count: (t: string) => (calls.plain.push(t), counter.count(t)),
    pieces: {
      countRecorded: (t: string) => (calls.recorded.push(t), counter.pieces!.countRecorded(t)),
      countDerived: (t: string, source: PieceRecord, runs: readonly CopiedRun[]) => (
        calls.derived.push(t),
        counter.pieces!.countDerived(t, source, runs)
      ),
    },
  };
  return { spy, calls, dispose: () => counter.dispose?.() };
}

describe('the measurement memo counts spaced segments from the compact pieces, exactly', () => {
  const text = fc.oneof(tokenizerText, longRun, fc.string({ unit: 'grapheme', maxLength: 80 }));
  const item = fc.oneof(
    fc.record({ role: fc.constant('tool'), tool_call_id: fc.string({ maxLength: 12 }), content: text }),
    fc.record({ role: fc.constantFrom('user', 'assistant'), content: text }),
    fc.record({ role: fc.constant('assistant'), content: fc.array(fc.record({ type: fc.constant('text'), text })) }),
    fc.jsonValue({ maxDepth: 3 }),
  );
  it.each([true, false])(
    'every segment equals tiktoken on that segment, in any order of asking (recordPieces %s)',
    (recordPieces) => {
      const reference = createTiktokenCounter('o200k_base', { engine: 'wasm' });
      const counter = createTiktokenCounter('o200k_base', { engine: 'js' });
      try {
        const segments = ['first', 'mid', 'last', 'only', 'alone'] as const;
        fc.assert(
          fc.property(item, fc.shuffledSubarray([...segments], { minLength: 1 }), (value, asked) => {
            const measures = createItemMeasures({ counter, recordPieces });
            const compact = canonicalJson(value, { compact: true });
            const json = canonicalJson(value);
            expect(measures.compactTokens(value)).toBe(reference.count(compact));
            const framed = { first: `[${json},`, mid: ` ${json},`, last: ` ${json}]`, only: `[${json}]`, alone: json };
            for (const s of asked) expect(measures.segmentTokens(value, s)).toBe(reference.count(framed[s]));
          }),
          { numRuns: RUNS },
        );
      } finally {
        reference.dispose?.();
        counter.dispose?.();
      }
    },
  );

  const toolOutput = { role: 'tool', tool_call_id: 'call_1', content: 'src/a.ts:1: error TS2304: x\n'.repeat(300) };

  it('a tool output counted for the stages is not counted again from scratch for telemetry (recordPieces)', () => {
    const { spy, calls, dispose } = spyCounter();
    try {
      const measures = createItemMeasures({ counter: spy, recordPieces: true });
      measures.compactTokens(toolOutput);
      for (const s of ['mid', 'last', 'alone'] as const) measures.segmentTokens(toolOutput, s);
      expect(calls.plain).toEqual([]);
      expect(calls.recorded).toEqual([canonicalJson(toolOutput, { compact: true })]);
      expect(calls.derived.length).toBe(3); // the spaced JSON once, then two framings
    } finally {
      dispose();
    }
  });

  it('a large item telemetry counts first gets its compact count on the way: a later gate tokenizes nothing', () => {
    const { spy, calls, dispose } = spyCounter();
    try {
      const measures = createItemMeasures({ counter: spy, recordPieces: true });
      const wasm = acquireEncoder('o200k_base', 'wasm'); // the reference, independent of the js engine
      leases.push(wasm);
      const counterCount = (text: string): number => wasm.count(text);
      const compact = canonicalJson(toolOutput, { compact: true });
      const mid = measures.segmentTokens(toolOutput, 'mid');
      expect(calls.recorded).toEqual([compact]);
      expect(calls.derived).toEqual([` ${canonicalJson(toolOutput)},`]);
      expect(calls.plain).toEqual([]);
      const before = { ...calls, recorded: [...calls.recorded], derived: [...calls.derived] };
      expect(measures.compactTokens(toolOutput)).toBe(counterCount(compact));
      expect(calls).toEqual(before);
      expect(mid).toBe(counterCount(` ${canonicalJson(toolOutput)},`));
      // A small item is not worth it: its segment is counted as it is.
      const small = { role: 'tool', tool_call_id: 'call_2', content: 'ok' };
      measures.segmentTokens(small, 'mid');
      expect(calls.recorded).toEqual([compact]);
      expect(calls.plain).toEqual([` ${canonicalJson(small)},`]);
    } finally {
      dispose();
    }
  });

  it('records nothing unless asked: the compact JSON gets a plain count, segments are counted afresh', () => {
    const { spy, calls, dispose } = spyCounter();
    try {
      const measures = createItemMeasures({ counter: spy });
      const compact = canonicalJson(toolOutput, { compact: true });
      measures.compactTokens(toolOutput);
      expect(calls.plain).toEqual([compact]);
      measures.segmentTokens(toolOutput, 'mid');
      expect(calls.plain).toEqual([compact, ` ${canonicalJson(toolOutput)},`]);
      expect(calls.recorded).toEqual([]);
      expect(calls.derived).toEqual([]);
    } finally {
      dispose();
    }
  });

  it("telemetry's figures are the same whether the shared memo records pieces or not", () => {
    const counter = createTiktokenCounter('o200k_base', { engine: 'js' });
    try {
      fc.assert(
        fc.property(fc.array(item, { minLength: 1, maxLength: 5 }), fc.boolean(), (messages, compactFirst) => {
          const figures = (recordPieces: boolean) => {
            const measures = createItemMeasures({ counter, recordPieces });
            if (compactFirst) for (const m of messages) measures.compactTokens(m);
            const meter = createMessagesMeter(counter, { measures });
            return {
              tokens: meter.tokens(messages),
              chars: meter.chars(messages),
              compact: messages.map((m) => measures.compactTokens(m)),
            };
          };
          expect(figures(true)).toEqual(figures(false));
        }),
        { numRuns: 60 },
      );
    } finally {
      counter.dispose?.();
    }
  });
});

describe('a long string counted on its own counts the item that carries it (notePieces)', () => {
  // A tool output: lines of stressing text with the characters JSON escapes, at least NOTED_FROM long.
  const output = fc
    .array(fc.oneof(tokenizerText, fc.constantFrom('"quoted"', 'C:\\dir\\f', '\t\ttab', '\u0001\u001f', '\r\n')), {
      minLength: 1,
      maxLength: 12,
    })
    .map((parts) => {
      const text = parts.join('\n');
      return text.repeat(Math.ceil(NOTED_FROM / Math.max(1, text.length)));
    });
  const carrying = (text: string) =>
    fc.oneof(
      fc.constant({ role: 'tool', tool_call_id: 'call_1', content: text }),
      fc.constant({ type: 'function_call_output', call_id: 'c', output: text }),
      fc.constant({
        role: 'user',
        content: [{ type: 'tool_result', tool_use_id: 't', content: [{ type: 'text', text }] }],
      }),
    );

  it('stringRuns says exactly where the literal copies the string, wherever it is written', () => {
    fc.assert(
      fc.property(
        fc.oneof(tokenizerText, fc.string({ unit: 'binary' })),
        fc.string({ maxLength: 5 }),
        (text, before) => {
          const at = before.length;
          const written = `${before}${jsonString(text)}!`;
          let covered = 0;
          for (const r of stringRuns(text, at)) {
            expect(written.slice(r.at, r.at + r.length)).toBe(text.slice(r.from, r.from + r.length));
            covered += r.length;
          }
          // Everything not copied is an escaped character.
          expect(covered).toBe(text.replace(/["\\\u0000-\u001f]/g, '').length);
          expect(canonicalJson({ a: text }, { compact: true })).toBe(`{"a":${jsonString(text)}}`);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('derives a JSON literal from the string, encoding only the pieces next to an escape', () => {
    const core = acquireEncoder('o200k_base', 'js');
    leases.push(core);
    const encoded: string[] = [];
    const engine = pieceCounting({
      split: new RegExp(SPLIT_PATTERNS.o200k_base, SPLIT_FLAGS),
      countPiece: (piece) => (encoded.push(piece), core.count(piece)),
    });
    const output = Array.from({ length: 300 }, (_, i) => `tests/test_${i}.py::test_case PASSED [${i % 100}%]`).join(
      '\n',
    );
    const source = engine.record(output)!;
    const pieces = encoded.length;
    encoded.length = 0;
    const compact = canonicalJson({ role: 'tool', content: output }, { compact: true });
    const derived = engine.derive(compact, source, stringRuns(output, compact.indexOf(jsonString(output))))!;
    expect(derived.total).toBe(core.count(compact));
    expect(encoded.length).toBeLessThan(pieces / 4); // the pieces at each escaped newline, not ~pieces
  });

  it('every figure equals tiktoken on the item', async () => {
    const reference = createTiktokenCounter('o200k_base', { engine: 'wasm' });
    const counter = createTiktokenCounter('o200k_base', { engine: 'js' });
    try {
      await fc.assert(
        fc.asyncProperty(
          output.chain((text) => fc.tuple(fc.constant(text), carrying(text))),
          async ([text, value]) => {
            const measures = createItemMeasures({ counter, recordPieces: true });
            const { count, record } = await recordInSlices(counter.pieces!, text, undefined, 600);
            // What countInSlices gives (a slice cut hard inside a line may differ from the whole's count).
            expect(count).toBe(await countInSlices(counter, text, undefined, 600));
            if (record === undefined) return; // a lone surrogate: nothing to hand over
            expect(record.total).toBe(count);
            measures.notePieces(text, record);
            const compact = canonicalJson(value, { compact: true });
            expect(measures.compactTokens(value)).toBe(reference.count(compact));
            expect(measures.segmentTokens(value, 'mid')).toBe(reference.count(` ${canonicalJson(value)},`));
          },
        ),
        { numRuns: 80 },
      );
    } finally {
      reference.dispose?.();
      counter.dispose?.();
    }
  });

  it.each([
    ['a Chat tool message', (text: string, id: string) => ({ role: 'tool', tool_call_id: id, content: text })],
    ['a Responses output', (text: string, id: string) => ({ type: 'function_call_output', call_id: id, output: text })],
    [
      'an Anthropic tool_result block',
      (text: string, id: string) => ({
        role: 'user',
        content: [{ type: 'tool_result', tool_use_id: id, content: [{ type: 'text', text }] }],
      }),
    ],
  ])('the JSON of %s carrying a noted output is derived, not recorded again', (_, item) => {
    const { spy, calls, dispose } = spyCounter();
    try {
      const measures = createItemMeasures({ counter: spy, recordPieces: true });
      const output = Array.from({ length: 300 }, (_, i) => `tests/test_${i}.py::test_case PASSED [${i % 100}%]`).join(
        '\n',
      );
      const value = item(output, 'call_9');
      const { record } = spy.pieces.countRecorded(output);
      measures.notePieces(output, record!);
      calls.recorded.length = 0;
      measures.compactTokens(value);
      expect(calls.recorded).toEqual([]);
      expect(calls.derived).toEqual([canonicalJson(value, { compact: true })]);
      // Used up: another item carrying the same output is recorded as usual.
      measures.compactTokens(item(output, 'call_10'));
      expect(calls.recorded.length).toBe(1);
    } finally {
      dispose();
    }
  });

  it("keeps a note while a gateway's accounting is its backlog behind: 128 outputs of 40,000 characters noted after it", () => {
    const { spy, calls, dispose } = spyCounter();
    try {
      const measures = createItemMeasures({ counter: spy, recordPieces: true });
      const line = (n: number, i: number) => `tests/test_${n}_${i}.py::test_case PASSED [${i % 100}%]`;
      const output = (n: number) =>
        Array.from({ length: 1000 }, (_, i) => line(n, i))
          .join('\n')
          .slice(0, 40_000);
      const first = output(0);
      const { record } = spy.pieces.countRecorded(first);
      measures.notePieces(first, record!);
      // The outputs of the requests answered meanwhile (their records are not read here).
      for (let n = 1; n <= 128; n++) measures.notePieces(output(n), record!);
      calls.recorded.length = 0;
      const value = { role: 'tool', tool_call_id: 'call_0', content: first };
      measures.compactTokens(value);
      expect(calls.recorded).toEqual([]);
      expect(calls.derived).toEqual([canonicalJson(value, { compact: true })]);
    } finally {
      dispose();
    }
  });
});

describe('piece counting over a split that does not cover the text', () => {
  const engine = (pattern: string) => pieceCounting({ split: new RegExp(pattern, 'gv'), countPiece: (p) => p.length });
  it('refuses it instead of counting a part of the text', () => {
    expect(() => engine('a').record('ab')).toThrow(/pieces: the split pattern left text over/);
    expect(() => engine('b').record('ab')).toThrow(/pieces: the split pattern/);
    expect(() => engine('b?').record('ab')).toThrow(/pieces: the split pattern skipped text/);
    expect(engine('[ab]').record('ab')?.total).toBe(2);
    expect(engine('b?').record('')?.total).toBe(0);
  });
});
