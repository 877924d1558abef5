/** Deep helpers for invariants: freezing caller objects, finding differences, walking string leaves. */
import { isDeepStrictEqual } from 'node:util';

/** Freeze a value and everything reachable from it. Returns the same value. */
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

/** Plain-data deep equality (own enumerable keys, prototypes ignored beyond arrays vs objects). */
export function sameData(a: unknown, b: unknown): boolean {
  return isDeepStrictEqual(toPlain(a), toPlain(b));
}

function toPlain(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(toPlain);
  if (typeof v === 'object' && v !== null) return Object.fromEntries(Object.keys(v).map((k) => [k, toPlain((v as Record<string, unknown>)[k])]));
  return v;
}

/** Where two values first differ, as a path plus a content-free description, or undefined when equal. */
export function firstDifference(a: unknown, b: unknown, path = '$'): string | undefined {
  if (Object.is(a, b)) return undefined;
  if (typeof a !== typeof b || Array.isArray(a) !== Array.isArray(b) || a === null || b === null || typeof a !== 'object') {
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
  if (typeof v === 'string') return `a string of ${[...v].length} code points (${JSON.stringify(v.slice(0, 40))}${v.length > 40 ? '…' : ''})`;
  if (Array.isArray(v)) return `an array of ${v.length}`;
  if (v === null) return 'null';
  if (typeof v === 'object') return 'an object';
  return `${typeof v} ${String(v)}`;
}

/** Every string reachable from a value (object keys excluded). */
export function stringLeaves(value: unknown, out: string[] = []): string[] {
  if (typeof value === 'string') out.push(value);
  else if (Array.isArray(value)) for (const v of value) stringLeaves(v, out);
  else if (typeof value === 'object' && value !== null) for (const v of Object.values(value)) stringLeaves(v, out);
  return out;
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
 * How a recovered artifact relates to the inputs: `exact` when it equals a string of an input,
 * `substring` when it is part of one, `structure` when it is the JSON of an input sub-value (or of
 * a run of consecutive items, e.g. collapsed turns), else undefined (the artifact is not evidence
 * the caller supplied).
 */
export function provenance(content: string, inputs: readonly unknown[]): 'exact' | 'substring' | 'structure' | undefined {
  const leaves = inputs.flatMap((v) => stringLeaves(v));
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
