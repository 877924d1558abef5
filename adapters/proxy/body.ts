/**
 * Request bodies whose conversation extends one this process already parsed.
 *
 * An agent re-sends its whole history with every call, so the body of request N+1 usually starts
 * with the bytes of request N up to the end of its last conversation item. Parsing the whole body
 * again (and then comparing every item with the previous request's, to find the objects the
 * pipeline's memos know) costs time that grows with the history. Here the new body is compared
 * byte for byte with a recent one of the same group (same API, tenant and session header); the
 * items wholly inside the shared bytes are the earlier parse's own objects, and only the bytes after
 * them are scanned and parsed. The value is what `JSON.parse` gives for the whole body: the same
 * keys in the same order, the same values; the shared items are the same objects as last time.
 *
 * A body the scan does not fully understand (duplicate or `__proto__` top-level keys, a list
 * that is not an array) is parsed whole and not remembered. Reuse is limited to the session the
 * earlier body belonged to (the caller's session id of the result must match), so no session is
 * handed objects another session's body produced. The request id digest (SHA-256 of the session id
 * and the body) is carried on from the shared bytes the same way.
 */
import { createHash, type Hash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { ConfigError } from '../../src/errors.js';
import { namedIdentity, type Digests } from '../../src/ledger/digests.js';

type Obj = Record<string, unknown>;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

class Unscannable extends Error {}

const isWs = (c: number | undefined): boolean => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

function skipWs(buf: Buffer, p: number): number {
  while (isWs(buf[p])) p++;
  return p;
}

/** Past the string starting at `p` (its opening quote). */
function skipString(buf: Buffer, p: number): number {
  let from = p + 1;
  for (;;) {
    const q = buf.indexOf(QUOTE, from);
    if (q < 0) throw new Unscannable('unterminated string');
    let k = q - 1;
    while (buf[k] === BACKSLASH) k--;
    if ((q - 1 - k) % 2 === 0) return q + 1;
    from = q + 1;
  }
}

/** Past the value starting at `p`: only its extent is found here, `JSON.parse` checks it. */
function skipValue(buf: Buffer, p: number): number {
  const c = buf[p];
  if (c === QUOTE) return skipString(buf, p);
  if (c === OPEN_BRACE || c === OPEN_BRACKET) {
    let depth = 0;
    while (p < buf.length) {
      const b = buf[p]!;
      if (b === QUOTE) {
        p = skipString(buf, p);
        continue;
      }
      if (b === OPEN_BRACE || b === OPEN_BRACKET) depth++;
      else if (b === CLOSE_BRACE || b === CLOSE_BRACKET) depth--;
      p++;
      if (depth === 0) return p;
    }
    throw new Unscannable('unterminated value');
  }
  // A number or a literal: up to the next separator.
  const start = p;
  while (p < buf.length && !isWs(buf[p]) && buf[p] !== COMMA && buf[p] !== CLOSE_BRACE && buf[p] !== CLOSE_BRACKET) p++;
  if (p === start) throw new Unscannable('no value');
  return p;
}

/** Elements of the array whose contents start at `p` (after `[`, or after an element): their extents, and the offset past `]`. */
function scanElements(buf: Buffer, p: number, first: boolean): { ranges: [number, number][]; end: number } {
  const ranges: [number, number][] = [];
  p = skipWs(buf, p);
  if (first && buf[p] === CLOSE_BRACKET) return { ranges, end: p + 1 };
  for (;;) {
    if (!first || ranges.length > 0) {
      if (buf[p] === CLOSE_BRACKET) return { ranges, end: p + 1 };
      if (buf[p] !== COMMA) throw new Unscannable('expected , or ]');
      p = skipWs(buf, p + 1);
    }
    const start = p;
    p = skipValue(buf, p);
    ranges.push([start, p]);
    p = skipWs(buf, p);
  }
}

/** A body as remembered for the next one. */
interface Parsed {
  readonly buf: Buffer;
  readonly value: Obj;
  readonly listKey: string;
  /** Top-level keys before the list, in order. */
  readonly headKeys: readonly string[];
  readonly items: readonly unknown[];
  /** Each item's extent: the offset of its first byte and the offset just past it. */
  readonly ranges: readonly (readonly [number, number])[];
  readonly sessionId: string;
  /** SHA-256 state after the session id and the bytes up to the end of the last item (items named: {@link hashItems}). */
  readonly digest: Hash;
}

/**
 * Feed `hash` the bytes of `buf` from `from` to the end of the last of `ranges`. With the item
 * ledger, each item (`items[i]`, whose bytes are `ranges[i]`) is fed as its named identity
 * (src/ledger/digests.ts): a tool output in it is hashed once, by the ledger the stages share.
 */
function hashItems(
  hash: Hash,
  buf: Buffer,
  from: number,
  ranges: readonly (readonly [number, number])[],
  items: readonly unknown[],
  digests: Digests | undefined,
): Hash {
  if (ranges.length === 0) return hash;
  if (digests === undefined) return hash.update(buf.subarray(from, ranges.at(-1)![1]));
  let p = from;
  ranges.forEach(([start, end], i) => {
    hash.update(buf.subarray(p, start)).update(namedIdentity(items[i], digests).digest);
    p = end;
  });
  return hash;
}

/** The outline of a whole body: top-level keys before the list, and the list's item extents. */
function outline(buf: Buffer, listKey: string): { headKeys: string[]; ranges: [number, number][] } | undefined {
  let p = skipWs(buf, 0);
  if (buf[p] !== OPEN_BRACE) return undefined;
  p = skipWs(buf, p + 1);
  const keys = new Set<string>();
  const headKeys: string[] = [];
  let ranges: [number, number][] | undefined;
  if (buf[p] === CLOSE_BRACE) return undefined;
  for (;;) {
    if (buf[p] !== QUOTE) return undefined;
    const ks = p;
    p = skipString(buf, p);
    const key = JSON.parse(buf.toString('utf8', ks, p)) as string;
    if (keys.has(key) || key === '__proto__') return undefined;
    keys.add(key);
    p = skipWs(buf, p);
    if (buf[p] !== COLON) return undefined;
    p = skipWs(buf, p + 1);
    if (key === listKey) {
      if (buf[p] !== OPEN_BRACKET) return undefined;
      const scanned = scanElements(buf, p + 1, true);
      ranges = scanned.ranges;
      p = scanned.end;
    } else {
      if (ranges === undefined) headKeys.push(key);
      p = skipValue(buf, p);
    }
    p = skipWs(buf, p);
    if (buf[p] === COMMA) {
      p = skipWs(buf, p + 1);
      continue;
    }
    if (buf[p] !== CLOSE_BRACE) return undefined;
    break;
  }
  return ranges === undefined ? undefined : { headKeys, ranges };
}

/** The first offset where `a` and `b` differ (their common length when one is a prefix of the other). */
export function firstDifference(a: Buffer, b: Buffer): number {
  const n = Math.min(a.length, b.length);
  const BLOCK = 1 << 16;
  let p = 0;
  while (p < n) {
    const end = Math.min(n, p + BLOCK);
    if (a.compare(b, p, end, p, end) !== 0) {
      while (a[p] === b[p]) p++;
      return p;
    }
    p = end;
  }
  return n;
}

/** How many of `ranges` end at or before `limit` (they ascend). */
function endsWithin(ranges: Parsed['ranges'], limit: number): number {
  let lo = 0;
  let hi = ranges.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (ranges[mid]![1] <= limit) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** One parse: the body's value, its session id, its request digest and how many items were reused. */
export interface BodyParse {
  readonly value: Obj;
  readonly sessionId: string;
  /**
   * Hex SHA-256 of the session id followed by the body (with the item ledger, each conversation item
   * written as its named identity: {@link BodyMemoOptions.digests}).
   */
  readonly digest: string;
  /** Leading conversation items taken from an earlier body (0: parsed whole). */
  readonly reused: number;
}

export interface BodyMemoOptions {
  /**
   * Memory remembered bodies may hold, each counted at twice its bytes (its bytes and its parse);
   * least recently used groups go first; 0 keeps none. Default 256 MiB.
   */
  readonly maxBytes?: number;
  /** Recent bodies kept per group. */
  readonly perGroup?: number;
  /**
   * The item ledger (the Terminator's): a body's digest names each of its items by its identity
   * there, so a tool output is hashed once, not again as bytes of every body. Default: the bytes.
   */
  readonly digests?: Digests;
}

/**
 * What a remembered body is counted at against `maxBytes`: its bytes, and as many again for its
 * parse, which the memo keeps alive as long (JSON text parses to strings of about as many bytes;
 * RELIABILITY.md, proxy-load).
 */
const footprint = (body: { readonly buf: Buffer }): number => 2 * body.buf.length;

/**
 * Recent bodies per group (API, tenant, session header), bounded by what they hold
 * ({@link footprint}). `parse` returns the body's JSON value (undefined when the body is not a
 * JSON object) as `JSON.parse` would.
 */
export class BodyMemo {
  readonly #groups: LRUCache<string, Parsed[]> | undefined;
  readonly #perGroup: number;
  readonly #digests: Digests | undefined;

  constructor(options: BodyMemoOptions = {}) {
    this.#digests = options.digests;
    const maxBytes = options.maxBytes ?? 256 * 1024 * 1024;
    this.#perGroup = options.perGroup ?? 4;
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 0)
      throw new ConfigError(`BodyMemo: maxBytes must be an integer ≥ 0 (got ${String(maxBytes)})`);
    if (!Number.isSafeInteger(this.#perGroup) || this.#perGroup < 1)
      throw new ConfigError(`BodyMemo: perGroup must be an integer ≥ 1 (got ${String(this.#perGroup)})`);
    this.#groups =
      maxBytes === 0
        ? undefined
        : new LRUCache({
            maxSize: maxBytes,
            sizeCalculation: (list) =>
              Math.max(
                1,
                list.reduce((n, b) => n + footprint(b), 0),
              ),
          });
  }

  /**
   * Parse `buf` (a request whose conversation list is `listKey`), reusing the items of a recent
   * body of `group` it extends; `sessionOf` names the session of a value.
   */
  parse(buf: Buffer, listKey: string, group: string, sessionOf: (value: Obj) => string): BodyParse | undefined {
    const recent = this.#groups?.get(group) ?? [];
    for (const earlier of recent) {
      let out: { parsed: Parsed; reused: number } | undefined;
      try {
        out = extend(earlier, buf, sessionOf, this.#digests);
      } catch {
        out = undefined; // not understood here: parsed whole below
      }
      if (out === undefined) continue;
      this.#remember(group, recent, earlier, out.parsed);
      return { ...result(out.parsed, buf), reused: out.reused };
    }
    let value: unknown;
    try {
      value = JSON.parse(buf.toString('utf8'));
    } catch {
      return undefined;
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
    const obj = value as Obj;
    const sessionId = sessionOf(obj);
    const digest = createHash('sha256').update(sessionId);
    const parsed = this.#groups === undefined ? undefined : whole(buf, obj, listKey, sessionId, digest, this.#digests);
    if (parsed === undefined) return { value: obj, sessionId, digest: digest.update(buf).digest('hex'), reused: 0 };
    this.#remember(group, recent, undefined, parsed);
    return { ...result(parsed, buf), reused: 0 };
  }

  /** Forget every remembered body (memory pressure: the next body of each session is parsed whole). */
  clear(): void {
    this.#groups?.clear();
  }

  #remember(group: string, recent: readonly Parsed[], replaced: Parsed | undefined, next: Parsed): void {
    const list = [next, ...recent.filter((b) => b !== replaced && b.sessionId !== next.sessionId)].slice(
      0,
      this.#perGroup,
    );
    this.#groups?.set(group, list);
  }
}

function result(parsed: Parsed, buf: Buffer): Omit<BodyParse, 'reused'> {
  const last = parsed.ranges.at(-1)?.[1] ?? 0;
  return {
    value: parsed.value,
    sessionId: parsed.sessionId,
    digest: parsed.digest.copy().update(buf.subarray(last)).digest('hex'),
  };
}

/** Remember a body parsed whole, when its outline is one this module reuses from. */
function whole(
  buf: Buffer,
  value: Obj,
  listKey: string,
  sessionId: string,
  digest: Hash,
  digests: Digests | undefined,
): Parsed | undefined {
  const items = value[listKey];
  if (!Array.isArray(items)) return undefined;
  let shape: ReturnType<typeof outline>;
  try {
    shape = outline(buf, listKey);
  } catch {
    return undefined;
  }
  if (shape === undefined || shape.ranges.length !== items.length || items.length === 0) return undefined;
  hashItems(digest, buf, 0, shape.ranges, items, digests);
  return { buf, value, listKey, headKeys: shape.headKeys, items, ranges: shape.ranges, sessionId, digest };
}

/** `buf` as an extension of `earlier`, or undefined when it shares no whole item with it. */
function extend(
  earlier: Parsed,
  buf: Buffer,
  sessionOf: (value: Obj) => string,
  digests: Digests | undefined,
): { parsed: Parsed; reused: number } | undefined {
  const shared = endsWithin(earlier.ranges, firstDifference(buf, earlier.buf));
  if (shared === 0) return undefined;
  const from = earlier.ranges[shared - 1]![1];
  const { ranges, end } = scanElements(buf, from, false);
  const items = earlier.items.slice(0, shared);
  if (ranges.length > 0) {
    const added = JSON.parse(`[${buf.toString('utf8', ranges[0]![0], ranges.at(-1)![1])}]`) as unknown[];
    if (added.length !== ranges.length) throw new Unscannable('item count');
    for (const item of added) items.push(item);
  }
  // After the list: `, "key": value … }` or `}`, then nothing but (JSON) whitespace.
  const p = skipWs(buf, end);
  let tail: Obj;
  if (buf[p] === COMMA) {
    if (buf[skipWs(buf, p + 1)] === CLOSE_BRACE) throw new Unscannable('trailing comma');
    tail = JSON.parse(`{${buf.toString('utf8', p + 1)}`) as Obj;
  } else if (buf[p] === CLOSE_BRACE && skipWs(buf, p + 1) === buf.length) tail = {};
  else throw new Unscannable('after the list');
  // A key given twice takes its first place and its last value: parsed whole (and not remembered).
  for (const key of Object.keys(tail))
    if (key === earlier.listKey || key === '__proto__' || earlier.headKeys.includes(key))
      throw new Unscannable('tail keys');
  if (Object.hasOwn(tail, '__proto__')) throw new Unscannable('tail keys');
  const value: Obj = {};
  for (const key of earlier.headKeys) value[key] = earlier.value[key];
  value[earlier.listKey] = items;
  for (const key of Object.keys(tail)) value[key] = tail[key];
  const sessionId = sessionOf(value);
  if (sessionId !== earlier.sessionId) return undefined;
  const all = [...earlier.ranges.slice(0, shared), ...ranges];
  const digest =
    shared === earlier.ranges.length
      ? hashItems(earlier.digest.copy(), buf, from, ranges, items.slice(shared), digests)
      : hashItems(createHash('sha256').update(sessionId), buf, 0, all, items, digests);
  return {
    parsed: {
      buf,
      value,
      listKey: earlier.listKey,
      headKeys: earlier.headKeys,
      items,
      ranges: all,
      sessionId,
      digest,
    },
    reused: shared,
  };
}
