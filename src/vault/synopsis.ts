/**
 * Lossy views of one artifact, computed in memory and deterministic for the same content:
 * the peek synopsis (head, tail, signal lines, shallow JSON structure) and line search (find).
 */
import { clipCodePoints, foldCase } from './identity.js';

export const HEAD_LINES = 6;
export const MAX_SIGNALS = 8;
export const LINE_CLIP = 500;
export const COMPACT_LINES = 3;
export const COMPACT_CLIP = 240;
export const FIND_TEXT_CLIP = 1000;
/** JSON structure is only computed for artifacts up to this many code points. */
export const MAX_STRUCTURE_CHARS = 250_000;
const MAX_STRUCTURE_KEYS = 50;
const MAX_STRUCTURE_ITEMS = 100;

/** Lines that mention one of these words (case-insensitive, as whole words) are signals. */
const SIGNAL = /\b(?:error|warning|failed|failure|exception|traceback|fatal)\b/i;

/** Split into lines: `\n` or `\r\n` ends a line; a final newline does not start an empty line. */
export function splitLines(content: string): string[] {
  if (content === '') return [];
  const lines = content.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines.map((line) => (line.endsWith('\r') ? line.slice(0, -1) : line));
}

export interface Synopsis {
  readonly head: readonly string[];
  readonly tail: readonly string[];
  readonly signals: readonly string[];
}

/** Head, tail (only when there are more lines than the head shows) and signal lines. */
export function synopsisOf(lines: readonly string[], keep: number, clip: number, signalCap: number): Synopsis {
  const head = lines.slice(0, keep).map((l) => clipCodePoints(l, clip));
  const tail = lines.length > HEAD_LINES ? lines.slice(-keep).map((l) => clipCodePoints(l, clip)) : [];
  const signals: string[] = [];
  for (const line of lines) {
    if (signals.length >= signalCap) break;
    if (SIGNAL.test(line)) signals.push(clipCodePoints(line, clip));
  }
  return Object.freeze({ head: Object.freeze(head), tail: Object.freeze(tail), signals: Object.freeze(signals) });
}

function jsonType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value === 'object' ? 'object' : typeof value;
}

/**
 * Shallow structure of a JSON artifact: object → first 50 keys, key count, truncated flag;
 * array → length and the sorted distinct types of the first 100 items; scalar → its type.
 * Non-JSON (or too large to parse cheaply) → `{ type: 'text' }`.
 */
export function structureOf(content: string, chars: number): unknown {
  const trimmed = content.trimStart();
  const first = trimmed[0];
  if (chars > MAX_STRUCTURE_CHARS || first === undefined || !'{["-0123456789tfn'.includes(first)) {
    return Object.freeze({ type: 'text' });
  }
  let value: unknown;
  try {
    value = JSON.parse(content);
  } catch {
    return Object.freeze({ type: 'text' });
  }
  const type = jsonType(value);
  if (type === 'object') {
    const keys = Object.keys(value as object);
    return Object.freeze({
      type,
      keys: Object.freeze(keys.slice(0, MAX_STRUCTURE_KEYS)),
      keyCount: keys.length,
      truncated: keys.length > MAX_STRUCTURE_KEYS,
    });
  }
  if (type === 'array') {
    const items = value as unknown[];
    const types = [...new Set(items.slice(0, MAX_STRUCTURE_ITEMS).map(jsonType))].sort();
    return Object.freeze({ type, items: items.length, itemTypes: Object.freeze(types) });
  }
  return Object.freeze({ type });
}

export interface LineMatches {
  readonly matches: readonly { readonly line: number; readonly text: string }[];
  readonly totalMatches: number;
}

/** Case-insensitive (Unicode-folded) substring matches per line, 1-based, at most `cap` returned. */
export function findLines(content: string, query: string, cap: number): LineMatches {
  const needle = foldCase(query);
  const matches: { line: number; text: string }[] = [];
  let total = 0;
  splitLines(content).forEach((line, i) => {
    if (!foldCase(line).includes(needle)) return;
    total++;
    if (matches.length < cap) matches.push(Object.freeze({ line: i + 1, text: clipCodePoints(line, FIND_TEXT_CLIP) }));
  });
  return { matches: Object.freeze(matches), totalMatches: total };
}
