/**
 * Python-compatible canonical JSON: what `json.dumps(value, sort_keys=True, ensure_ascii=False)`
 * prints for the same data, so char counts match the reference benchmark.
 *
 * Decisions where JavaScript and Python data differ:
 * - A number that is an integer (`Number.isInteger`) with |x| < 1e16 prints as a Python int (`1`,
 *   `-0` → `0`); any other finite number prints as a Python float (`1.5`, `1e-05`, `1e+16`).
 *   JSON.parse cannot tell `1` from `1.0`, and provider requests carry ints far more often.
 * - NaN / ±Infinity print as `NaN`, `Infinity`, `-Infinity`; bigint prints as a Python int.
 * - Strings: `"` `\\` and controls < 0x20 are escaped (`\n \r \t \b \f`, others `\u00xx` lowercase);
 *   everything else, lone surrogates included, is emitted raw.
 * - Plain objects (prototype Object.prototype or null) are dicts with keys sorted by code point;
 *   arrays are lists. `undefined`, functions and symbols follow JSON.stringify, because that is
 *   what reaches the wire: omitted as object values, `null` in arrays and at the top level.
 * - Other objects use `toJSON()` when they have it (Date → ISO string), else `String(value)`
 *   (Python's `default=str`).
 * - A cycle throws a TypeError (Python raises ValueError).
 */

export interface CanonicalJsonOptions {
  /** Separators `,` and `:` (hash/id JSON) instead of `, ` and `: `. @defaultValue false */
  readonly compact?: boolean;
}

// Characters that force the slow path of string handling: escapes and surrogates.
const NEEDS_SCAN = /["\\\u0000-\u001f\ud800-\udfff]/;
const NEEDS_ESCAPE = /["\\\u0000-\u001f]/;
const SURROGATE = /[\ud800-\udfff]/;
const SHORT_ESCAPES: Readonly<Record<number, string>> = {
  8: '\\b',
  9: '\\t',
  10: '\\n',
  12: '\\f',
  13: '\\r',
  34: '\\"',
  92: '\\\\',
};

/**
 * Number of Unicode code points in `s` (a lone surrogate counts as one, as in Python).
 *
 * @example
 * codePoints('a😀'); // 2
 */
export function codePoints(s: string): number {
  // The native regex scan is several times faster than the loop, and most text has no surrogates.
  if (!SURROGATE.test(s)) return s.length;
  let n = s.length;
  for (let i = 0; i < s.length - 1; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n--;
        i++;
      }
    }
  }
  return n;
}

/** Every string inside a JSON value (object keys excluded), and with `numbers` every number, in order. */
export function stringsOf(value: unknown, out: string[] = [], numbers = false): string[] {
  if (typeof value === 'string') out.push(value);
  else if (numbers && typeof value === 'number') out.push(String(value));
  else if (Array.isArray(value)) for (const v of value) stringsOf(v, out, numbers);
  else if (typeof value === 'object' && value !== null)
    for (const v of Object.values(value)) stringsOf(v, out, numbers);
  return out;
}

/** Whole-value walks so far in this process: canonicalJson calls (objects by separators, primitives), serializedChars calls. */
const walks = { compact: 0, spaced: 0, primitive: 0, sized: 0 };

/**
 * How many times this process serialized an object or array (`canonicalJson`, compact and spaced),
 * a primitive, or sized a value (`serializedChars`): a bench reads the difference around the work
 * it measures.
 */
export function serializationStats(): Readonly<typeof walks> {
  return { ...walks };
}

/**
 * Python-compatible JSON of `value` (see the module comment for every rule).
 *
 * @example
 * canonicalJson({ b: 1, a: [true] }); // '{"a": [true], "b": 1}'
 */
export function canonicalJson(value: unknown, options: CanonicalJsonOptions = {}): string {
  const compact = options.compact === true;
  if (typeof value !== 'object' || value === null) walks.primitive++;
  else if (compact) walks.compact++;
  else walks.spaced++;
  return writeValue(value, compact ? ',' : ', ', compact ? ':' : ': ') ?? 'null';
}

/**
 * The compact canonical JSON of `value` with each string value `name` names (object keys excepted)
 * written as `#` and that name instead of its quoted literal: no JSON text has `#` outside a
 * string, so with collision-free names (digests) it names the compact JSON as surely as its own
 * digest would, while hashing only what `name` has not hashed yet (the item ledger's identity).
 */
export function canonicalJsonNamed(value: unknown, name: (s: string) => string | undefined): string {
  walks.compact++;
  return writeValue(value, ',', ':', name) ?? 'null';
}

/**
 * Code points of `canonicalJson(value, options)`, computed without building the string.
 *
 * @example
 * import { canonicalJson, serializedChars } from 'token-terminator';
 * const value = { b: [1, 2], a: 'x' };
 * serializedChars(value) === [...canonicalJson(value)].length; // true
 */
export function serializedChars(value: unknown, options: CanonicalJsonOptions = {}): number {
  const compact = options.compact === true;
  walks.sized++;
  return sizeValue(value, compact ? 1 : 2) ?? 4;
}

/**
 * Size of a JSON array whose elements have the given serialized sizes: lets a caller that memoizes
 * per-element sizes get the size of the whole array without serializing it.
 *
 * @example
 * import { serializedArrayChars, serializedChars } from 'token-terminator';
 * const items = ['one', 'two'];
 * serializedArrayChars(items.map((x) => serializedChars(x))) === serializedChars(items); // true
 */
export function serializedArrayChars(elementSizes: Iterable<number>, options: CanonicalJsonOptions = {}): number {
  const sep = options.compact === true ? 1 : 2;
  let total = 2;
  let count = 0;
  for (const size of elementSizes) {
    total += size;
    count++;
  }
  return count === 0 ? total : total + sep * (count - 1);
}

/**
 * Size of a JSON object from its entries' serialized value sizes (keys are sized here; the order
 * of entries does not change the size, so callers need not sort).
 *
 * @example
 * import { serializedChars, serializedObjectChars } from 'token-terminator';
 * const value = { a: 1, bb: 'x' };
 * serializedObjectChars(Object.entries(value).map(([k, v]) => [k, serializedChars(v)] as const)) === serializedChars(value); // true
 */
export function serializedObjectChars(
  entries: Iterable<readonly [key: string, valueSize: number]>,
  options: CanonicalJsonOptions = {},
): number {
  const sep = options.compact === true ? 1 : 2;
  return serializedArrayChars(
    Array.from(entries, ([key, size]) => stringChars(key) + sep + size),
    options,
  );
}

/**
 * Python `repr(float)` for a finite or non-finite JS number.
 *
 * @example
 * import { pythonFloatRepr } from 'token-terminator';
 * pythonFloatRepr(1); // '1.0'
 * pythonFloatRepr(1e21); // '1e+21'
 */
export function pythonFloatRepr(x: number): string {
  if (Number.isNaN(x)) return 'NaN';
  if (x === Infinity) return 'Infinity';
  if (x === -Infinity) return '-Infinity';
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  // toExponential() without digits gives the shortest round-trip digits, like Python's repr.
  const [mantissa = '0', expText = '0'] = x.toExponential().split('e');
  const exp = Number(expText);
  const negative = mantissa.startsWith('-');
  const digits = mantissa.replace('-', '').replace('.', '');
  const decpt = exp + 1;
  let body: string;
  if (decpt > 16 || decpt <= -4) {
    const frac = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    const e = Math.abs(exp);
    body = `${frac}e${exp < 0 ? '-' : '+'}${e < 10 ? '0' : ''}${e}`;
  } else if (decpt <= 0) {
    body = `0.${'0'.repeat(-decpt)}${digits}`;
  } else if (decpt >= digits.length) {
    body = `${digits}${'0'.repeat(decpt - digits.length)}.0`;
  } else {
    body = `${digits.slice(0, decpt)}.${digits.slice(decpt)}`;
  }
  return negative ? `-${body}` : body;
}

function numberText(x: number): string {
  if (Number.isInteger(x) && Math.abs(x) < 1e16) return Object.is(x, -0) ? '0' : String(x);
  return pythonFloatRepr(x);
}

/**
 * The JSON string literal of `s` as canonical JSON writes it (`"` `\\` and controls escaped,
 * everything else as is).
 */
export function jsonString(s: string): string {
  if (!NEEDS_ESCAPE.test(s)) return `"${s}"`;
  // Without surrogates JSON.stringify escapes exactly like Python (short forms, lowercase \u00xx,
  // DEL and U+2028 raw) and is native; only lone surrogates differ, so they take the loop below.
  if (!SURROGATE.test(s)) return JSON.stringify(s);
  let out = '"';
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x20 && c !== 34 && c !== 92) continue;
    out += s.slice(start, i) + (SHORT_ESCAPES[c] ?? `\\u00${c < 16 ? '0' : ''}${c.toString(16)}`);
    start = i + 1;
  }
  return `${out}${s.slice(start)}"`;
}

/**
 * Where the literal {@link jsonString}(`s`), written at offset `at` of a text, copies `s`
 * verbatim: the runs between escaped characters, as `{ at, from, length }` (text offset, offset
 * in `s`, length), ascending.
 *
 * @example
 * stringRuns('ab\ncd', 10); // [{ at: 11, from: 0, length: 2 }, { at: 15, from: 3, length: 2 }]
 */
export function stringRuns(s: string, at: number): { at: number; from: number; length: number }[] {
  const runs: { at: number; from: number; length: number }[] = [];
  // The characters jsonString escapes (NEEDS_ESCAPE), each found in turn.
  const escaped = new RegExp(NEEDS_ESCAPE.source, 'g');
  let from = 0;
  let to = at + 1;
  for (let m = escaped.exec(s); m !== null; m = escaped.exec(s)) {
    const i = m.index;
    if (i > from) runs.push({ at: to, from, length: i - from });
    to += i - from + (SHORT_ESCAPES[s.charCodeAt(i)]?.length ?? 6);
    from = i + 1;
  }
  if (s.length > from) runs.push({ at: to, from, length: s.length - from });
  return runs;
}

function stringChars(s: string): number {
  if (!NEEDS_SCAN.test(s)) return s.length + 2;
  let n = codePoints(s) + 2;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20) n += SHORT_ESCAPES[c] === undefined ? 5 : 1;
    else if (c === 34 || c === 92) n += 1;
  }
  return n;
}

/**
 * Code point order (Python's str ordering); differs from `<` only when a surrogate is involved.
 *
 * @example
 * import { compareCodePoints } from 'token-terminator';
 * ['\u{1F600}', '\uFF01'].sort(compareCodePoints); // ['\uFF01', '\u{1F600}'] (plain sort puts the emoji first)
 */
export function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    const xs = x >= 0xd800 && x <= 0xdfff;
    const ys = y >= 0xd800 && y <= 0xdfff;
    if (xs === ys) return x - y;
    // A surrogate encodes a code point ≥ 0x10000 (or is lone, 0xd800–0xdfff); compare as such.
    return (xs ? (a.codePointAt(i) ?? x) : x) - (ys ? (b.codePointAt(i) ?? y) : y);
  }
  return a.length - b.length;
}

function isPlainObject(v: object): v is Record<string, unknown> {
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === Object.prototype || proto === null;
}

function sortedKeys(obj: Record<string, unknown>): string[] {
  const keys = Object.keys(obj);
  return keys.length > 1 ? keys.sort(compareCodePoints) : keys;
}

/** An array or plain object being walked: its keys (undefined for an array), its next child, what it has so far. */
interface Frame<A> {
  readonly obj: Record<string, unknown>;
  readonly keys: readonly string[] | undefined;
  next: number;
  acc: A;
}

const END = Symbol('end');

/** The child `f` takes next, an object's absent values skipped (they write and size as nothing); `END` after the last. */
function nextChild(f: Frame<unknown>): unknown {
  const length = f.keys?.length ?? (f.obj as unknown as unknown[]).length;
  while (f.next < length) {
    const child = f.keys === undefined ? f.obj[f.next] : f.obj[f.keys[f.next]!];
    f.next++;
    if (f.keys === undefined || (child !== undefined && typeof child !== 'function' && typeof child !== 'symbol'))
      return child;
  }
  return END;
}

/**
 * `value` as the walks see it (a non-plain object replaced by its stand-in); an array or plain
 * object is entered in `seen`, where a cycle finds it. The walks keep their frames on a stack of
 * their own, not the call stack: a value nested thousands of levels deep is written like any other.
 */
function enter(value: unknown, seen: Set<object>): unknown {
  const v =
    typeof value === 'object' && value !== null && !Array.isArray(value) && !isPlainObject(value)
      ? foreign(value)
      : value;
  if (typeof v !== 'object' || v === null) return v;
  if (seen.has(v)) throw new TypeError('canonicalJson: circular reference');
  seen.add(v);
  return v;
}

function writeValue(
  root: unknown,
  itemSep: string,
  keySep: string,
  name?: (s: string) => string | undefined,
): string | undefined {
  const stack: Frame<string[]>[] = [];
  const seen = new Set<object>();
  let value = enter(root, seen);
  for (;;) {
    let text: string | undefined;
    if (typeof value === 'object' && value !== null) {
      const obj = value as Record<string, unknown>;
      stack.push({ obj, keys: Array.isArray(obj) ? undefined : sortedKeys(obj), next: 0, acc: [] });
    } else text = scalarText(value, name);
    // Each finished value goes to its container (whose `next` is past it); a container with no child left closes.
    for (let f = stack.at(-1); ; f = stack.at(-1)) {
      if (f === undefined) return text;
      if (f.keys === undefined && f.next > 0) f.acc.push(text ?? 'null');
      else if (f.keys !== undefined && text !== undefined)
        f.acc.push(`${jsonString(f.keys[f.next - 1]!)}${keySep}${text}`);
      const child = nextChild(f);
      if (child !== END) {
        value = enter(child, seen);
        break;
      }
      stack.pop();
      seen.delete(f.obj);
      text = f.keys === undefined ? `[${f.acc.join(itemSep)}]` : `{${f.acc.join(itemSep)}}`;
    }
  }
}

function scalarText(value: unknown, name?: (s: string) => string | undefined): string | undefined {
  switch (typeof value) {
    case 'string': {
      const named = name?.(value);
      return named === undefined ? jsonString(value) : `#${named}`;
    }
    case 'number':
      return numberText(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'bigint':
      return value.toString();
    case 'object':
      return 'null';
    default:
      return undefined; // undefined, functions and symbols
  }
}

function sizeValue(root: unknown, sep: number): number | undefined {
  const stack: Frame<number>[] = [];
  const seen = new Set<object>();
  let value = enter(root, seen);
  for (;;) {
    let size: number | undefined;
    if (typeof value === 'object' && value !== null) {
      const obj = value as Record<string, unknown>;
      stack.push({ obj, keys: Array.isArray(obj) ? undefined : Object.keys(obj), next: 0, acc: 2 });
    } else size = typeof value === 'string' ? stringChars(value) : scalarText(value)?.length;
    // As in writeValue; an object counts a key whose value sizes as nothing (a toJSON giving undefined) as `key: `.
    for (let f = stack.at(-1); ; f = stack.at(-1)) {
      if (f === undefined) return size;
      if (f.next > 0) {
        const comma = f.acc > 2 ? sep : 0;
        f.acc +=
          f.keys === undefined ? (size ?? 4) + comma : stringChars(f.keys[f.next - 1]!) + sep + (size ?? 0) + comma;
      }
      const child = nextChild(f);
      if (child !== END) {
        value = enter(child, seen);
        break;
      }
      stack.pop();
      seen.delete(f.obj);
      size = f.acc;
    }
  }
}

/** The stand-in for a non-plain object: its toJSON() result, else its string form. */
function foreign(obj: object): unknown {
  const toJSON = (obj as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === 'function') {
    const out = (toJSON as () => unknown).call(obj);
    return out !== null && typeof out === 'object' && !Array.isArray(out) && !isPlainObject(out) ? String(out) : out;
  }
  return String(obj);
}
