/** Deep helpers for invariants: freezing caller objects, finding differences, tracing provenance. */
import { isDeepStrictEqual } from 'node:util';
import { canonicalJson, stringsOf } from '../measure/canonical-json.js';

/**
 * Freeze a value and everything reachable from it. Returns the same value.
 *
 * @example
 * const request = deepFreeze(structuredClone(input)); // a mutation now throws
 */
export function deepFreeze<V>(value: V): V {
  const seen = new Set<object>();
  const walk = (v: unknown): void => {
    if (typeof v !== 'object' || v === null || seen.has(v)) return;
    seen.add(v);
    for (const key of Reflect.ownKeys(v)) walk((v as Record<PropertyKey, unknown>)[key]);
    Object.freeze(v);
  };
  walk(value);
  return value;
}

/**
 * Plain-data deep equality (own enumerable keys, prototypes ignored beyond arrays vs objects).
 *
 * @example
 * expect(sameData(step.original, input)).toBe(true);
 */
export function sameData(a: unknown, b: unknown): boolean {
  return isDeepStrictEqual(toPlain(a), toPlain(b));
}

function toPlain(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(toPlain);
  if (typeof v === 'object' && v !== null)
    return Object.fromEntries(Object.keys(v).map((k) => [k, toPlain((v as Record<string, unknown>)[k])]));
  return v;
}

/**
 * Where two values first differ, as a path plus a content-free description, or undefined when equal.
 *
 * @example
 * import { firstDifference } from 'token-terminator/testing';
 * firstDifference({ a: [1, 2] }, { a: [1, 3] }); // names the path $.a[1]; undefined when equal
 */
export function firstDifference(a: unknown, b: unknown, path = '$'): string | undefined {
  if (Object.is(a, b)) return undefined;
  if (
    typeof a !== typeof b ||
    Array.isArray(a) !== Array.isArray(b) ||
    a === null ||
    b === null ||
    typeof a !== 'object'
  ) {
    return `${path}: ${shape(a)} became ${shape(b)}`;
  }
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.max(a.length, b.length); i++) {
      const d = firstDifference(a[i], b[i], `${path}[${i}]`);
      if (d !== undefined) return d;
    }
    return undefined;
  }
  const ao = a as Record<string, unknown>;
  const bo = b as Record<string, unknown>;
  for (const key of new Set([...Object.keys(ao), ...Object.keys(bo)])) {
    if (!(key in bo)) return `${path}.${key}: removed`;
    if (!(key in ao)) return `${path}.${key}: added`;
    const d = firstDifference(ao[key], bo[key], `${path}.${key}`);
    if (d !== undefined) return d;
  }
  return undefined;
}

function shape(v: unknown): string {
  if (typeof v === 'string')
    return `a string of ${[...v].length} code points (${JSON.stringify(v.slice(0, 40))}${v.length > 40 ? '…' : ''})`;
  if (Array.isArray(v)) return `an array of ${v.length}`;
  if (v === null) return 'null';
  if (typeof v === 'object') return 'an object';
  return `${typeof v} ${String(v)}`;
}

/** Every sub-value of a value, and every contiguous slice of every array in it. */
function* subValues(value: unknown): Generator<unknown> {
  yield value;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) for (let j = i + 1; j <= value.length; j++) yield value.slice(i, j);
    for (const v of value) yield* subValues(v);
  } else if (typeof value === 'object' && value !== null) {
    for (const v of Object.values(value)) yield* subValues(v);
  }
}

/**
 * Whether `value` (parsed from an artifact) equals input sub-value `sub` except for texts an earlier
 * stage replaced by a marker naming an artifact in `recovered` that holds exactly that text (a string,
 * or a content-block list's canonical JSON): vaulting reduced content stays lossless, one hop more.
 */
export function matchesWithMarkers(
  value: unknown,
  sub: unknown,
  recovered: ReadonlyMap<string, string>,
  ids: (text: string) => readonly string[],
): boolean {
  if (typeof value === 'string') {
    if (typeof sub === 'string' && value === sub) return true;
    const texts = typeof sub === 'string' ? [sub] : joinedTexts(sub);
    if (texts.length === 0) return false;
    return ids(value).some((id) => {
      const content = recovered.get(id);
      return content !== undefined && texts.includes(content);
    });
  }
  if (Array.isArray(value) || Array.isArray(sub)) {
    if (!Array.isArray(value) || !Array.isArray(sub) || value.length !== sub.length) return false;
    return value.every((v, i) => matchesWithMarkers(v, sub[i], recovered, ids));
  }
  if (typeof value === 'object' && value !== null && typeof sub === 'object' && sub !== null) {
    const a = value as Record<string, unknown>;
    const b = sub as Record<string, unknown>;
    const keys = Object.keys(a);
    if (keys.length !== Object.keys(b).length || !keys.every((k) => k in b)) return false;
    return keys.every((k) => matchesWithMarkers(a[k], b[k], recovered, ids));
  }
  return sameData(value, sub);
}

// The texts a structured value stands for when a stage vaults it as one string: its canonical
// JSON (how content-block lists are vaulted), spaced or compact.
function joinedTexts(v: unknown): string[] {
  if (typeof v !== 'object' || v === null) return [];
  return [canonicalJson(v), canonicalJson(v, { compact: true })];
}

/** Every input sub-value (and contiguous array slice) `value` matches modulo earlier markers. */
export function derivedProvenance(
  value: unknown,
  inputs: readonly unknown[],
  recovered: ReadonlyMap<string, string>,
  ids: (text: string) => readonly string[],
): boolean {
  for (const input of inputs)
    for (const sub of subValues(input)) if (matchesWithMarkers(value, sub, recovered, ids)) return true;
  return false;
}

/**
 * How a recovered artifact relates to the inputs: `exact` when it equals a string of an input,
 * `substring` when it is part of one, `structure` when it is the JSON of an input sub-value (or of
 * a run of consecutive items, e.g. collapsed turns), else undefined (the artifact is not evidence
 * the caller supplied).
 */
export function provenance(
  content: string,
  inputs: readonly unknown[],
): 'exact' | 'substring' | 'structure' | undefined {
  const leaves = inputs.flatMap((v) => stringsOf(v));
  if (leaves.includes(content)) return 'exact';
  if (leaves.some((s) => s.includes(content))) return 'substring';
  let parsed: unknown;
  try {
    parsed = JSON.parse(content);
  } catch {
    return undefined;
  }
  for (const input of inputs) for (const sub of subValues(input)) if (sameData(sub, parsed)) return 'structure';
  return undefined;
}
