/**
 * The one memo of what the request path measures of a conversation item (or any request value):
 * its size, content identity and token counts, kept per item object and, for hosts that rebuild
 * their objects, per content hash. The runtime's one is read by the request stages, the
 * output-budget counter and telemetry, so an item is serialized once, each long string hashed once
 * (the digest ledger: docs/cache-policy.md) and each distinct text tokenized once.
 *
 * Two texts are counted per item: the compact canonical JSON (`{"a":1}`: stages and budget) and
 * the spaced JSON as it sits in a serialized array (` {"a": 1},`: telemetry). A BPE count of one
 * says nothing exact about the other (`":1` and `": 1` are different pieces), so each keeps its own
 * count on the same entry; the spaced text is derived from the compact one
 * ({@link spacedFromCompact}), and with piece records ({@link ItemMeasures.notePieces},
 * src/measure/pieces.ts) a count is derived from pieces already encoded.
 *
 * Bounded: entries by object are held weakly, by content hash and texts not yet counted in LRU
 * caches. Like every identity memo of the request stages, this assumes a message object is not
 * mutated in place after it was sent.
 */
import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { createDigests, NAMED_FROM, type Digests } from './digests.js';
import { canonicalJson, codePoints } from '../measure/index.js';
import { canonicalJsonNamed, jsonString, stringRuns } from '../measure/canonical-json.js';
import { digestKey } from './count-memo.js';
import type { CopiedRun, PieceRecord } from '../measure/pieces.js';
import type { TokenCounter } from '../measure/types.js';
import { entryBoundLru } from '../lru.js';
import { intOption } from '../options.js';
import { WeakMemo } from '../weak-memo.js';
import { STORED_COUNT_FIELDS, type CountRow, type StoredCounts } from '../vault/ports.js';
import type { Recognitions } from '../model/prefix.js';

/** How an item's spaced JSON is framed where telemetry counts it: its segment of a serialized array. */
export type Segment = 'first' | 'mid' | 'last' | 'only' | 'alone';

/** The content-derived measures of one value (shared by every object with that content). */
class Measures {
  /** Tokens of the compact canonical JSON. */
  compact?: number;
  /** Tokens of `[json,` ` json,` ` json]` `[json]` `json` (spaced canonical JSON). */
  first?: number;
  mid?: number;
  last?: number;
  only?: number;
  alone?: number;
  constructor(
    /** Code points of the spaced canonical JSON (serializedChars). */
    readonly chars: number,
    /** The item's identity (see {@link ItemEntry.hash}); empty when the memo keeps no content index. */
    readonly hash: string,
  ) {}
}

/** What an entry exposes: sizes and the counts known so far (read-only; the fields the count store keeps). */
export interface ItemEntry extends StoredCounts {
  /** serializedChars of the value: code points of its spaced canonical JSON. */
  readonly chars: number;
  /**
   * The content identity of the compact canonical JSON: SHA-256 (base64) of that JSON with each
   * string of at least {@link NAMED_FROM} code units written as its ledger digest
   * ({@link ItemMeasures.digests}), so a tool output inside an item is hashed once, by the
   * ledger, and every later stage (the vault's id, receipts, a count memo's key) reuses that
   * digest. '' without a content index.
   */
  readonly hash: string;
}

/** The shared measurement memo (see the module comment). */
export interface ItemMeasures {
  /** The counter every token figure of the memo comes from (none: sizes and hashes only). */
  readonly counter: TokenCounter | undefined;
  /** True when entries carry content hashes and a rebuilt object finds its content's entry. */
  readonly byContent: boolean;
  /** The digest ledger every stage reading this memo names content by (one hash per text). */
  readonly digests: Digests;
  /** The entry of a value (measured on first sight). */
  entry(value: unknown): ItemEntry;
  /** Spaced canonical JSON of a value (the kept text, else derived from the kept compact one, else serialized). */
  spacedJson(value: unknown): string;
  /** Tokens of the compact canonical JSON (counted once per content); undefined without a counter. */
  compactTokens(value: unknown): number | undefined;
  /** Tokens of the spaced JSON framed as `segment` (counted once per content); undefined without a counter. */
  segmentTokens(value: unknown, segment: Segment): number | undefined;
  /**
   * Hand over the pieces of a long string counted with this memo's counter (a tool output): the
   * first item counted here whose JSON carries it derives its count from them, so the output is
   * tokenized once, not again as JSON. Kept until used, bounded in characters.
   */
  notePieces(text: string, record: PieceRecord): void;
  /**
   * Fill the counts not yet known of the entry with content hash `hash` (its {@link ItemEntry.hash})
   * from counts the same counter made elsewhere (the vault's count store); nothing when no entry
   * has that hash. Counts already known stay: they are the same numbers.
   */
  absorb(hash: string, counts: StoredCounts): void;
  /**
   * The entries (content hash and every count known) whose counts were tokenized here since the
   * last call, and are at least {@link ItemMeasuresOptions.trackCounted} characters: what to add to
   * the count store. Empty unless that option is set.
   */
  takeCounted(): CountRow[];
  /** Entries held by content hash (for tests and stats). */
  readonly size: number;
  /** Forget every count and size (e.g. after the counter's tokenizer changed). */
  clear(): void;
}

/** Options of {@link createItemMeasures}; every field is optional. */
export interface ItemMeasuresOptions {
  /** Counter for the token figures. @defaultValue none: sizes and hashes only */
  readonly counter?: TokenCounter;
  /**
   * Keep an index by content hash, so a rebuilt copy of an item finds its measures (one walk and
   * one SHA-256 per new object; a long string is hashed once per ledger).
   *
   * @defaultValue true
   */
  readonly byContent?: boolean;
  /** Entries kept by content hash (least recently used dropped). @defaultValue 20000 */
  readonly maxEntries?: number;
  /**
   * The equalities the request stages recognised (the runtime's): a rebuilt copy they recognised
   * as an earlier object shares that object's entry.
   *
   * @defaultValue none: objects are known by identity (and by content when `byContent`)
   */
  readonly recognitions?: Recognitions;
  /**
   * Record the pieces of each compact JSON counted (a counter with `pieces`), so a spaced segment
   * asked later is derived from them. Set it when a telemetry meter reads this memo: recording costs
   * about a quarter more on each compact count.
   *
   * @defaultValue false: compact JSON is counted plainly, segments afresh
   */
  readonly recordPieces?: boolean;
  /**
   * Remember the entries of at least this many characters whose counts this memo tokenized, for
   * {@link ItemMeasures.takeCounted} (at most {@link COUNTED_KEPT} between two calls).
   *
   * @defaultValue none: nothing is remembered
   */
  readonly trackCounted?: number;
  /**
   * The digest ledger an item's identity names its long strings by (the stages ask the same one).
   *
   * @defaultValue a ledger of the memo's own
   */
  readonly digests?: Digests;
}

/** Entries remembered for {@link ItemMeasures.takeCounted} between two calls (the oldest dropped first). */
export const COUNTED_KEPT = 4096;

/** Texts kept for values measured but perhaps not yet counted: at most this many, and this many characters. */
const TEXTS_KEPT = 1024;
const TEXT_CHARS_KEPT = 8_000_000;
/** Piece records kept for entries not yet counted spaced, in pieces (about 8 bytes each). */
const RECORD_PIECES_KEPT = 1_000_000;
/**
 * Characters of noted strings kept until an item carrying them is counted: the gateway counts up
 * to 128 answered requests late, and at 2,000,000 four in five notes were dropped under bench
 * proxy-load (those outputs tokenized twice).
 */
const NOTED_CHARS_KEPT = 8_000_000;
/** Shorter strings are not noted: encoding them again costs less than looking for them. */
export const NOTED_FROM = 1024;
/** How deep an item is searched for a noted string (an Anthropic tool_result text block sits four levels down). */
const NOTED_DEPTH = 5;
/** Primitives up to this many characters are memoized by value (model names, short inputs). */
const PRIMITIVE_CHARS = 256;
/** Items from this size (code points of the spaced JSON) get their compact count when telemetry first counts a segment of them. */
const PRIME_COMPACT_CHARS = 1024;

/** The pieces of an entry's compact JSON, and the runs its spaced JSON copies (null: not a copy). */
interface CompactPieces {
  readonly record: PieceRecord;
  runs?: readonly CopiedRun[] | null;
}

const SEPARATORS = /("[^"\\]*(?:\\.[^"\\]*)*")|([,:])/g;

/**
 * The spaced canonical JSON of a value from its compact one: each `,` and `:` outside a string
 * literal gets its space back (nothing else differs).
 *
 * @example
 * spacedFromCompact('{"a":[1,2],"b":"x, y: z"}'); // '{"a": [1, 2], "b": "x, y: z"}'
 */
export function spacedFromCompact(compact: string): string {
  if (!compact.includes(',') && !compact.includes(':')) return compact;
  return compact.replace(SEPARATORS, (m: string, str: string | undefined) => (str !== undefined ? m : `${m} `));
}

/** Character codes of `"`, `\`, `,` and `:`. */
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;

/**
 * How many spaces {@link spacedFromCompact} inserts into `compact`, without building the spaced
 * text (an entry's size is known from its compact text alone).
 *
 * @example
 * spacesIn('{"a":[1,2],"b":"x, y: z"}'); // 4
 */
export function spacesIn(compact: string): number {
  let n = 0;
  let inString = false;
  for (let i = 0; i < compact.length; i++) {
    const c = compact.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) inString = true;
    else if (c === COMMA || c === COLON) n++;
  }
  return n;
}

/**
 * Where {@link spacedFromCompact}'s output copies its input: the runs between the inserted spaces.
 *
 * @example
 * spacedRuns('{"a":1}'); // [{ at: 0, from: 0, length: 5 }, { at: 6, from: 5, length: 2 }]
 */
export function spacedRuns(compact: string): CopiedRun[] {
  const runs: CopiedRun[] = [];
  let from = 0;
  let shift = 0;
  if (compact.includes(',') || compact.includes(':'))
    for (const m of compact.matchAll(SEPARATORS)) {
      if (m[1] !== undefined) continue;
      const cut = m.index + 1; // a space goes after the separator
      runs.push({ at: from + shift, from, length: cut - from });
      from = cut;
      shift++;
    }
  runs.push({ at: from + shift, from, length: compact.length - from });
  return runs;
}

/**
 * True when `json` is `compact` cut at `runs` with one space in each cut: with {@link spacedRuns},
 * exactly when `json === spacedFromCompact(compact)`.
 *
 * @example
 * spacedAlong('{"a": 1}', '{"a":1}', spacedRuns('{"a":1}')); // true
 */
export function spacedAlong(json: string, compact: string, runs: readonly CopiedRun[]): boolean {
  if (json.length !== compact.length + runs.length - 1) return false;
  for (let i = 0; i < runs.length; i++) {
    const r = runs[i]!;
    if (i > 0 && json.charCodeAt(r.at - 1) !== 0x20) return false;
    // Slices compared whole (V8 compares their flat contents); startsWith walks a long run char by char.
    if (json.slice(r.at, r.at + r.length) !== compact.slice(r.from, r.from + r.length)) return false;
  }
  return true;
}

const SEGMENT_PREFIX: Readonly<Record<Segment, string>> = { first: '[', mid: ' ', last: ' ', only: '[', alone: '' };
const SEGMENT_SUFFIX: Readonly<Record<Segment, string>> = { first: ',', mid: ',', last: ']', only: ']', alone: '' };

/** The caches of one memo, made anew by {@link ItemMeasures.clear}. */
type MeasureCaches = ReturnType<typeof freshCaches>;

/** One memo's settings and caches. */
interface MeasureState extends MeasureCaches {
  readonly counter: TokenCounter | undefined;
  readonly byContent: boolean;
  readonly maxEntries: number;
  readonly digests: Digests;
  /** The ledger digest a long string is written as in an item's identity (undefined: written as is). */
  readonly named: (text: string) => string | undefined;
  readonly recognitions: Recognitions | undefined;
  readonly pieces: TokenCounter['pieces'] | undefined;
  readonly trackAbove: number | undefined;
}

function freshCaches(maxEntries: number) {
  return {
    byRef: new WeakMemo<object, Measures>(),
    // A session's own measures mostly hold a few hundred entries: storage grows with them.
    byHash: entryBoundLru<string, Measures>(maxEntries),
    primitives: new LRUCache<string, Measures>({ max: 1024 }),
    texts: new LRUCache<Measures, { compact?: string; spaced?: string }>({
      max: TEXTS_KEPT,
      maxSize: TEXT_CHARS_KEPT,
      sizeCalculation: (t) => Math.max(1, (t.compact?.length ?? 0) + (t.spaced?.length ?? 0)),
    }),
    records: new LRUCache<Measures, CompactPieces>({
      maxSize: RECORD_PIECES_KEPT,
      sizeCalculation: (r) => Math.max(1, r.record.counts.length),
    }),
    noted: new LRUCache<string, PieceRecord>({ maxSize: NOTED_CHARS_KEPT, sizeCalculation: (_r, text) => text.length }),
    // Insertion-ordered: past the bound the oldest goes (it is only a missed chance to share a count).
    counted: new Set<Measures>(),
  };
}

function tokenized(s: MeasureState, m: Measures): void {
  if (s.trackAbove === undefined || m.hash === '' || m.chars < s.trackAbove) return;
  s.counted.delete(m);
  s.counted.add(m);
  if (s.counted.size > COUNTED_KEPT) s.counted.delete(s.counted.values().next().value as Measures);
}

/** Measure a value never seen by this memo. */
function make(s: MeasureState, value: unknown): Measures {
  if (!s.byContent) {
    const spaced = canonicalJson(value);
    const m = new Measures(codePoints(spaced), '');
    s.texts.set(m, { spaced });
    return m;
  }
  // A rebuilt copy is a lookup of its long strings and one SHA-256 of the short rest: not serialized.
  const hash = createHash('sha256').update(canonicalJsonNamed(value, s.named), 'utf8').digest('base64');
  let m = s.byHash.get(hash); // refreshed: the least recently used content goes first
  if (m !== undefined) return m;
  const compact = canonicalJson(value, { compact: true });
  // Only the compact text is kept: the spaced one is a function of it (spacedJsonOf).
  m = new Measures(codePoints(compact) + spacesIn(compact), hash);
  s.texts.set(m, { compact });
  s.byHash.set(hash, m);
  return m;
}

function measuresOf(s: MeasureState, value: unknown): Measures {
  if (typeof value === 'object' && value !== null) {
    // A rebuilt copy the stages recognised shares the earlier object's entry (asked only for
    // objects this memo does not know: asking may record a whole request's recognitions).
    const own = s.byRef.get(value);
    if (own !== undefined) return own;
    const key = s.recognitions?.canonicalOf(value) ?? value;
    let m = s.byRef.get(key);
    if (m === undefined) s.byRef.set(key, (m = make(s, value)));
    return m;
  }
  const short =
    typeof value === 'number' ||
    typeof value === 'boolean' ||
    (typeof value === 'string' && value.length <= PRIMITIVE_CHARS);
  if (!short) return make(s, value);
  const key = `${typeof value}:${String(value)}`;
  let m = s.primitives.get(key);
  if (m === undefined) s.primitives.set(key, (m = make(s, value)));
  return m;
}

function compactJsonOf(s: MeasureState, value: unknown, m = measuresOf(s, value)): string {
  return s.texts.get(m)?.compact ?? canonicalJson(value, { compact: true });
}

function spacedJsonOf(s: MeasureState, value: unknown, m = measuresOf(s, value)): string {
  const t = s.texts.get(m);
  if (t?.spaced !== undefined) return t.spaced;
  return t?.compact === undefined ? canonicalJson(value) : spacedFromCompact(t.compact);
}

/**
 * The pieces of the entry's compact JSON, with the runs its spaced JSON `json` copies from it;
 * undefined when they are not kept, or `json` is not exactly the compact text with its spaces.
 */
function copiedFrom(s: MeasureState, value: unknown, m: Measures, json: string): CompactPieces | undefined {
  const kept = s.records.get(m);
  if (kept === undefined) return undefined;
  if (kept.runs === undefined) {
    const compact = compactJsonOf(s, value, m);
    // The runs are where spacedFromCompact copies its input: only valid for exactly that output.
    const runs = spacedRuns(compact);
    kept.runs = spacedAlong(json, compact, runs) ? runs : null;
  }
  return kept.runs === null ? undefined : kept;
}

/**
 * The count memo's key of the entry's compact JSON or spaced `segment` (after a `.`, outside the
 * base64 alphabet): both are functions of what the identity names. Undefined without one.
 */
function countKey(m: Measures, text: string, segment?: Segment): string | undefined {
  return m.hash === '' ? undefined : digestKey(text.length, segment === undefined ? m.hash : `${m.hash}.${segment}`);
}

function compactTokensOf(s: MeasureState, value: unknown, m = measuresOf(s, value)): number | undefined {
  if (s.counter === undefined) return undefined;
  if (m.compact !== undefined) return m.compact;
  const text = compactJsonOf(s, value, m);
  tokenized(s, m);
  const key = countKey(m, text);
  if (s.pieces === undefined) return (m.compact = s.counter.count(text, key));
  const source = s.noted.size === 0 ? undefined : notedSource(s, value, text);
  const { count, record } =
    source === undefined
      ? s.pieces.countRecorded(text, key)
      : s.pieces.countDerived(text, source.record, source.runs, key);
  if (record !== undefined) s.records.set(m, { record });
  return (m.compact = count);
}

/** A string of `value` whose pieces were noted, and the runs `compact` (its JSON) copies it along; the note is used up. */
function notedSource(
  s: MeasureState,
  value: unknown,
  compact: string,
): { record: PieceRecord; runs: CopiedRun[] } | undefined {
  const found = notedIn(s.noted, value, NOTED_DEPTH);
  if (found === undefined) return undefined;
  const record = s.noted.get(found)!;
  s.noted.delete(found);
  const at = compact.indexOf(jsonString(found));
  return at < 0 ? undefined : { record, runs: stringRuns(found, at) };
}

function notedIn(noted: MeasureCaches['noted'], value: unknown, depth: number): string | undefined {
  if (typeof value === 'string') return value.length >= NOTED_FROM && noted.has(value) ? value : undefined;
  if (depth === 0 || typeof value !== 'object' || value === null) return undefined;
  for (const v of Array.isArray(value) ? value : Object.values(value)) {
    const found = notedIn(noted, v, depth - 1);
    if (found !== undefined) return found;
  }
  return undefined;
}

function segmentTokensOf(s: MeasureState, value: unknown, segment: Segment): number | undefined {
  const { counter, pieces } = s;
  if (counter === undefined) return undefined;
  const m = measuresOf(s, value);
  const known = m[segment];
  if (known !== undefined) return known;
  const json = spacedJsonOf(s, value, m);
  const prefix = SEGMENT_PREFIX[segment];
  const text = `${prefix}${json}${SEGMENT_SUFFIX[segment]}`;
  // A large item is counted compact first and the segment derived: a later request's gate (or
  // the output budget) then finds the compact count instead of tokenizing on its critical path.
  if (pieces !== undefined && m.compact === undefined && m.chars >= PRIME_COMPACT_CHARS) compactTokensOf(s, value, m);
  const compact = pieces === undefined ? undefined : copiedFrom(s, value, m, json);
  tokenized(s, m);
  const key = countKey(m, text, segment);
  if (compact === undefined) return (m[segment] = counter.count(text, key));
  const runs = prefix.length === 0 ? compact.runs! : compact.runs!.map((r) => ({ ...r, at: r.at + prefix.length }));
  return (m[segment] = pieces!.countDerived(text, compact.record, runs, key).count);
}

function absorbCounts(s: MeasureState, hash: string, stored: StoredCounts): void {
  const m = s.byHash.peek(hash);
  if (m === undefined) return;
  for (const field of STORED_COUNT_FIELDS) {
    const n = stored[field];
    if (m[field] === undefined && n !== undefined && Number.isSafeInteger(n) && n >= 0) m[field] = n;
  }
}

function takeCountedRows(s: MeasureState): CountRow[] {
  const rows: CountRow[] = [];
  for (const m of s.counted) {
    const row: { -readonly [K in keyof CountRow]: CountRow[K] } = { hash: m.hash };
    for (const field of STORED_COUNT_FIELDS) if (m[field] !== undefined) row[field] = m[field];
    rows.push(row);
  }
  s.counted = new Set();
  return rows;
}

/**
 * Create a measurement memo (see the module comment).
 *
 * @example
 * const measures = createItemMeasures({ counter: createTiktokenCounter() });
 * measures.entry({ role: 'user', content: 'hi' }).chars; // 33
 * measures.compactTokens({ role: 'user', content: 'hi' }); // counted once, then remembered
 * @throws ConfigError when `maxEntries` is not an integer ≥ 1.
 */
export function createItemMeasures(options: ItemMeasuresOptions = {}): ItemMeasures {
  const counter = options.counter;
  const digests = options.digests ?? createDigests();
  const maxEntries = intOption('createItemMeasures', 'maxEntries', options.maxEntries, 20_000, 1);
  const s: MeasureState = {
    counter,
    byContent: options.byContent !== false,
    maxEntries,
    digests,
    named: (text) => (text.length >= NAMED_FROM ? digests.of(text) : undefined),
    recognitions: options.recognitions,
    pieces: options.recordPieces === true ? counter?.pieces : undefined,
    trackAbove:
      options.trackCounted === undefined
        ? undefined
        : intOption('createItemMeasures', 'trackCounted', options.trackCounted, 0, 0),
    ...freshCaches(maxEntries),
  };
  return {
    counter,
    byContent: s.byContent,
    digests: s.digests,
    entry: (value) => measuresOf(s, value),
    spacedJson: (value) => spacedJsonOf(s, value),
    compactTokens: (value) => compactTokensOf(s, value),
    segmentTokens: (value, segment) => segmentTokensOf(s, value, segment),
    notePieces: (text, record) => {
      if (s.pieces !== undefined && text.length >= NOTED_FROM) s.noted.set(text, record);
    },
    absorb: (hash, stored) => absorbCounts(s, hash, stored),
    takeCounted: () => takeCountedRows(s),
    get size() {
      return s.byHash.size;
    },
    clear() {
      Object.assign(s, freshCaches(s.maxEntries));
      s.digests.clear();
    },
  };
}
