import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  canonicalJson,
  codePoints,
  compareCodePoints,
  pythonFloatRepr,
  serializedArrayChars,
  serializedChars,
  serializedObjectChars,
} from '../../src/measure/index.js';
import { canonicalJsonNamed } from '../../src/measure/canonical-json.js';

// Golden strings are what CPython 3 prints for json.dumps(x, sort_keys=True, ensure_ascii=False)
// of the same data (integer-valued floats excepted: JavaScript cannot tell 1.0 from 1, and we
// print those as Python ints — see the module comment).
describe('canonicalJson (unit)', () => {
  it('matches Python for nested objects, unicode and escapes', () => {
    const value = { role: 'user', content: 'line1\nline2\ttab \x01\x1b é中😀' };
    expect(canonicalJson(value)).toBe('{"content": "line1\\nline2\\ttab \\u0001\\u001b é中😀", "role": "user"}');
  });

  it('sorts keys by code point, not by UTF-16 unit', () => {
    // JS sort() would put the astral key (\ud83d…) before \uffff; Python puts it after.
    const value = { a: { z: null, '\u{1f600}': 1, '\uffff': 2 } };
    expect(canonicalJson(value)).toBe('{"a": {"z": null, "\uffff": 2, "😀": 1}}');
    expect(compareCodePoints('\uffff', '\u{1f600}')).toBeLessThan(0);
    expect(['\u{1f600}', '\uffff', 'a'].sort(compareCodePoints)).toEqual(['a', '\uffff', '\u{1f600}']);
  });

  it('prints mixed scalars like Python', () => {
    const value = { z: [1, 2.5, { y: 'x', b: null }], a: true, é: false, A: -3.75 };
    expect(canonicalJson(value)).toBe('{"A": -3.75, "a": true, "z": [1, 2.5, {"b": null, "y": "x"}], "é": false}');
    expect(canonicalJson({ '': '', k: [[]], e: {} })).toBe('{"": "", "e": {}, "k": [[]]}');
  });

  it('prints floats with Python repr rules', () => {
    const value = [1e-7, 5e-324, 1.7976931348623157e308, 0.5, 2 ** 60, 123.456, -1e-4, 1e-4];
    expect(canonicalJson(value)).toBe(
      '[1e-07, 5e-324, 1.7976931348623157e+308, 0.5, 1.152921504606847e+18, 123.456, -0.0001, 0.0001]',
    );
    // Literals past double precision on purpose: the canonical form must print what JS prints.
    // eslint-disable-next-line no-loss-of-precision
    const more = [0.1, 1.5e300, -2.5e-7, 123456789012345.6, 1e22, Infinity, -Infinity, 0.0001, 1234567890123456.7, NaN];
    expect(canonicalJson(more)).toBe(
      '[0.1, 1.5e+300, -2.5e-07, 123456789012345.6, 1e+22, Infinity, -Infinity, 0.0001, 1234567890123456.8, NaN]',
    );
    expect(pythonFloatRepr(1)).toBe('1.0');
    expect(pythonFloatRepr(-0)).toBe('-0.0');
    expect(pythonFloatRepr(1e16)).toBe('1e+16');
    expect(pythonFloatRepr(1e15)).toBe('1000000000000000.0');
    expect(pythonFloatRepr(1e-5)).toBe('1e-05');
    expect(pythonFloatRepr(0.9)).toBe('0.9');
  });

  it('prints integers as Python ints below 1e16 and -0 as 0', () => {
    expect(canonicalJson([1, -0, 1e15, 1e16, 12n])).toBe('[1, 0, 1000000000000000, 1e+16, 12]');
  });

  it('escapes controls with short forms and lowercase \\u00xx, leaves DEL, U+2028 and lone surrogates raw', () => {
    expect(canonicalJson({ t: '\t\r\b\f\x7f\u2028' })).toBe('{"t": "\\t\\r\\b\\f\x7f\u2028"}');
    expect(canonicalJson('\x00\x1f\n"\\ é')).toBe('"\\u0000\\u001f\\n\\"\\\\ é"');
    expect(canonicalJson('lone \ud800 surrogate')).toBe('"lone \ud800 surrogate"');
  });

  it('uses compact separators on request', () => {
    expect(canonicalJson({ b: [1, 2], a: { c: 'd' } }, { compact: true })).toBe('{"a":{"c":"d"},"b":[1,2]}');
  });

  it('follows JSON.stringify for undefined, functions and symbols', () => {
    expect(canonicalJson({ a: undefined, b: () => 1, c: Symbol('s'), d: 1 })).toBe('{"d": 1}');
    expect(canonicalJson([undefined, () => 1])).toBe('[null, null]');
    expect(canonicalJson(undefined)).toBe('null');
    expect(serializedChars(undefined)).toBe(4);
  });

  it('stringifies unknown objects (toJSON first, else String())', () => {
    class Point {
      toString(): string {
        return 'Point(1, 2)';
      }
    }
    const date = new Date(Date.UTC(2026, 0, 2, 3, 4, 5));
    expect(canonicalJson({ p: new Point(), m: new Map([[1, 2]]), d: date })).toBe(
      '{"d": "2026-01-02T03:04:05.000Z", "m": "[object Map]", "p": "Point(1, 2)"}',
    );
    expect(canonicalJson(Object.assign(Object.create(null) as object, { b: 1, a: 2 }))).toBe('{"a": 2, "b": 1}');
  });

  it('throws on cycles', () => {
    const a: Record<string, unknown> = {};
    a['self'] = a;
    expect(() => canonicalJson(a)).toThrow(TypeError);
    expect(() => serializedChars(a)).toThrow(TypeError);
  });

  it('writes and sizes values nested deeper than the call stack allows (10,000 levels), byte for byte', () => {
    const depth = 10_000;
    let value: unknown = 'leaf';
    for (let i = 0; i < depth; i++) value = i % 2 === 0 ? [value, 1] : { b: value, a: null };
    // Innermost first: odd levels are arrays `[x, 1]`, even ones objects `{"a": null, "b": x}`.
    let expected = '"leaf"';
    for (let i = 0; i < depth; i++) expected = i % 2 === 0 ? `[${expected}, 1]` : `{"a": null, "b": ${expected}}`;
    expect(canonicalJson(value)).toBe(expected);
    expect(serializedChars(value)).toBe(expected.length);
    expect(canonicalJsonNamed(value, (s) => (s === 'leaf' ? 'L' : undefined))).toBe(
      expected.replaceAll(', ', ',').replaceAll(': ', ':').replace('"leaf"', '#L'),
    );
  });

  it('counts code points, pairs once and lone surrogates once', () => {
    expect(codePoints('a😀b')).toBe(3);
    expect(codePoints('\ud800\ud800')).toBe(2);
    expect(codePoints('\udc00\ud83d\ude00')).toBe(2);
    expect(codePoints('')).toBe(0);
    expect(serializedChars('😀')).toBe(3);
    expect(serializedChars('\x01')).toBe(8);
  });
});

// Values as they reach the wire, with the awkward parts: lone surrogates, controls, astral keys,
// NaN/±Infinity/-0, integers past 1e16, undefined holes.
const scalar = fc.oneof(
  fc.string({ unit: 'binary' }),
  fc.string({ unit: fc.constantFrom('a', '"', '\\', '\n', '\x00', '\x1f', '\ud800', '\udc00', '😀', 'é', '\u2028') }),
  fc.double(),
  fc.integer(),
  fc.constantFrom(1e16, 2 ** 60, -0, 1e21, 5e-324),
  fc.boolean(),
  fc.constant(null),
  fc.constant(undefined),
);
const anyValue = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: 'small', withCrossShrink: true }, scalar, tie('array'), tie('object')),
  array: fc.array(tie('value'), { maxLength: 5 }),
  object: fc.dictionary(fc.string({ unit: 'binary', maxLength: 6 }), tie('value'), { maxKeys: 5 }),
})).value;

describe('canonicalJson (properties)', () => {
  it('serializedChars equals the code points of canonicalJson, both separator styles', () => {
    fc.assert(
      fc.property(anyValue, fc.boolean(), (value, compact) => {
        expect(serializedChars(value, { compact })).toBe(codePoints(canonicalJson(value, { compact })));
      }),
      { numRuns: 500 },
    );
  });

  it('sums per-element sizes into the size of the whole array or object', () => {
    fc.assert(
      fc.property(fc.array(anyValue, { maxLength: 8 }), fc.boolean(), (items, compact) => {
        const defined = items.map((v) => (v === undefined ? null : v));
        expect(
          serializedArrayChars(
            defined.map((v) => serializedChars(v, { compact })),
            { compact },
          ),
        ).toBe(serializedChars(defined, { compact }));
        const obj = Object.fromEntries(defined.map((v, i) => [`k${i}\n😀`, v]));
        const entries = Object.entries(obj).map(([k, v]) => [k, serializedChars(v, { compact })] as const);
        expect(serializedObjectChars(entries, { compact })).toBe(serializedChars(obj, { compact }));
      }),
      { numRuns: 200 },
    );
  });

  it('agrees with a JSON.stringify-based reference on integer-only JSON', () => {
    // Reference: JSON.stringify for leaves, keys sorted by hand (Object.fromEntries would put
    // integer-like keys first, so a sorted object cannot be handed to JSON.stringify whole).
    const reference = (v: unknown): string =>
      Array.isArray(v)
        ? `[${v.map(reference).join(',')}]`
        : v !== null && typeof v === 'object'
          ? `{${Object.keys(v)
              .sort()
              .map((k) => `${JSON.stringify(k)}:${reference((v as Record<string, unknown>)[k])}`)
              .join(',')}}`
          : JSON.stringify(v);
    const intJson = fc.letrec((tie) => ({
      v: fc.oneof(
        { depthSize: 'small' },
        fc.string(),
        fc.integer(),
        fc.boolean(),
        fc.constant(null),
        fc.array(tie('v'), { maxLength: 4 }),
        fc.dictionary(fc.string(), tie('v'), { maxKeys: 4 }),
      ),
    })).v;
    fc.assert(
      fc.property(intJson, (value) => {
        expect(canonicalJson(value, { compact: true })).toBe(reference(value));
      }),
      { numRuns: 300 },
    );
  });

  it('is a fixed point through JSON.parse for JSON data', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const once = canonicalJson(value);
        expect(canonicalJson(JSON.parse(once))).toBe(once);
      }),
      { numRuns: 300 },
    );
  });
});
