/**
 * Short counterexample renderings. fast-check prints a failing value with `fc.stringify`, which
 * honours `fc.toStringMethod`; a 30,000-char request printed in full hides the point, so generated
 * streams and sessions describe their shape instead (the seed and path replay the exact value).
 */
import fc from 'fast-check';

/**
 * Attach a non-enumerable summary used by fast-check reports. Returns the same object.
 *
 * @example
 * import { withSummary } from 'token-terminator/testing';
 * import fc from 'fast-check';
 * const big = fc.string().map((s) => withSummary({ text: s.repeat(1000) }, () => `text of ${s.length * 1000} chars`));
 */
export function withSummary<V extends object>(value: V, summary: () => string): V {
  Object.defineProperty(value, fc.toStringMethod, { value: summary, enumerable: false, configurable: true });
  return value;
}

/** `"12,345 chars"` for strings, a type name otherwise. */
export function describeValue(value: unknown): string {
  if (typeof value === 'string') return `${value.length.toLocaleString('en-US')} chars`;
  if (Array.isArray(value)) return `${value.length} parts`;
  return value === null ? 'null' : typeof value;
}
