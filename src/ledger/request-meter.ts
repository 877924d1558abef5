/**
 * The per-session meter that makes request measurement incremental: a request's size is the sum
 * of its items' sizes plus framing, each item measured once (src/ledger/item-measures.ts: by
 * object identity, with a content hash fallback for hosts that rebuild their objects every call),
 * so a request with k new items costs about those k. The per-item memo is the runtime's shared one
 * when given (the other request stages, the output budget and telemetry read the same entries),
 * else the meter's own; what the meter keeps itself is per session: the running sums of the lists
 * it was last asked about.
 */
import { serializedChars, serializedObjectChars } from '../measure/index.js';
import type { TokenCounter } from '../measure/types.js';
import type { Digests } from './digests.js';
import { createItemMeasures, type ItemEntry, type ItemMeasures } from './item-measures.js';
import { isRecognisedList, sharedLead, type RecognisedLists, type Recognitions } from '../model/prefix.js';

export interface Meter {
  /** The digest ledger of the item measures this meter reads (one hash per text; see src/ledger/digests.ts). */
  readonly digests: Digests;
  /** Size and content identity of one item (memoized). */
  measure(item: unknown): Pick<ItemEntry, 'chars' | 'hash'>;
  /** Tokens of one item's compact canonical JSON (memoized by content); undefined without a counter. */
  tokens(item: unknown): number | undefined;
  /** serializedChars of a whole request whose conversation list is `items` under `listKey`. */
  requestChars(
    request: Readonly<Record<string, unknown>>,
    listKey: string | undefined,
    items: readonly unknown[],
  ): number;
  /** Token estimate of a whole request: Σ item tokens + other top-level values (exact counter only). */
  requestTokens(
    request: Readonly<Record<string, unknown>>,
    listKey: string | undefined,
    items: readonly unknown[],
  ): number | undefined;
  /** Running sums of the items' chars: element i < items.length is Σ chars of items 0 … i (do not mutate; may run on). */
  cumulativeChars(items: readonly unknown[]): readonly number[];
  /**
   * Tokens of the items that differ between two lists of the same length (`raw[i] !== candidate[i]`),
   * summed on each side; undefined without a counter (unless no item differs: then 0 and 0).
   */
  changedTokens(
    raw: readonly unknown[],
    candidate: readonly unknown[],
  ): { readonly raw: number; readonly candidate: number } | undefined;
  /** Content-hash memo entries currently held (for tests and stats). */
  readonly size: number;
}

export interface MeterOptions {
  /** Counter for token sizes; tokens are only computed when it is exact. Default: none. */
  readonly counter?: TokenCounter;
  /**
   * The per-item memo to read (shared with other stages and telemetry); used when it keeps a
   * content index and counts with `counter` (or `counter` is not given). Default: the meter's own.
   */
  readonly measures?: ItemMeasures;
  /**
   * The lists of the session's request memo, which tell how much of an earlier list a later one
   * shares without comparing them (src/model/prefix.ts). Default: none (lists are compared).
   */
  readonly lists?: RecognisedLists;
  /** The recognitions the meter's own memo reads (when it makes one): the stage's. Default: none. */
  readonly recognitions?: Recognitions;
}

// Running sums over the last lists asked for (private copies), so a list that extends one of
// them is summed over its new items only: a long history is not looked up item by item again.
const SUMS_KEPT = 3;

type Request = Readonly<Record<string, unknown>>;

/** One meter's memo and running sums. */
interface MeterState {
  /** The counter, when it is exact (tokens are computed only then). */
  readonly counter: TokenCounter | undefined;
  readonly measures: ItemMeasures;
  readonly lists: RecognisedLists | undefined;
  charSums: { items: readonly unknown[]; cum: number[] }[];
  // The same for the token sums of the items two lists differ in (the gate's raw and candidate).
  pairSums: { raw: readonly unknown[]; candidate: readonly unknown[]; a: number[]; b: number[] } | undefined;
}

function tokensOf(s: MeterState, item: unknown): number | undefined {
  return s.counter === undefined ? undefined : s.measures.compactTokens(item);
}

/** Running sums of the items' chars. */
function cumulative(s: MeterState, items: readonly unknown[]): readonly number[] {
  let best: { items: readonly unknown[]; cum: number[] } | undefined;
  let shared = 0;
  for (const m of s.charSums) {
    const x = sharedLead(items, m.items, s.lists);
    if (best === undefined || x > shared) [best, shared] = [m, x];
  }
  if (best !== undefined && shared === items.length && shared === best.items.length) {
    s.charSums = [best, ...s.charSums.filter((m) => m !== best)];
    return best.cum;
  }
  // Sums that end where the shared run does are extended in place (an earlier list reads only its
  // first items.length of them); others are cut to a copy.
  const cum = best === undefined ? [] : best.cum.length === shared ? best.cum : best.cum.slice(0, shared);
  let total = shared > 0 ? cum[shared - 1]! : 0;
  for (let i = shared; i < items.length; i++) cum.push((total += s.measures.entry(items[i]).chars));
  // A recognised list is never changed: kept as it is (its lineage then answers sharedLead).
  s.charSums.unshift({ items: isRecognisedList(items, s.lists) ? items : items.slice(), cum });
  if (s.charSums.length > SUMS_KEPT) s.charSums.length = SUMS_KEPT;
  return cum;
}

function changedTokens(
  s: MeterState,
  raw: readonly unknown[],
  candidate: readonly unknown[],
): { raw: number; candidate: number } | undefined {
  if (s.counter === undefined) {
    for (let i = 0; i < raw.length; i++) if (raw[i] !== candidate[i]) return undefined;
    return { raw: 0, candidate: 0 };
  }
  const pairSums = s.pairSums;
  let shared = 0;
  if (pairSums !== undefined) {
    const n = Math.min(raw.length, pairSums.raw.length);
    while (shared < n && raw[shared] === pairSums.raw[shared] && candidate[shared] === pairSums.candidate[shared])
      shared++;
  }
  // The running sums are the meter's own: cut back in place, not copied (the pair is let go until
  // they are whole again, so a count that throws leaves none half-written).
  s.pairSums = undefined;
  const a = pairSums === undefined ? [] : pairSums.a;
  const b = pairSums === undefined ? [] : pairSums.b;
  a.length = shared;
  b.length = shared;
  let ta = shared > 0 ? a[shared - 1]! : 0;
  let tb = shared > 0 ? b[shared - 1]! : 0;
  for (let i = shared; i < raw.length; i++) {
    if (raw[i] !== candidate[i]) {
      ta += tokensOf(s, raw[i])!;
      tb += tokensOf(s, candidate[i])!;
    }
    a.push(ta);
    b.push(tb);
  }
  // A recognised list is never changed: kept as it is (a caller's own array may be, in place).
  s.pairSums = { raw: isRecognisedList(raw, s.lists) ? raw : raw.slice(), candidate: candidate.slice(), a, b };
  return { raw: ta, candidate: tb };
}

function otherValues(request: Request, listKey: string | undefined): [string, unknown][] {
  return Object.entries(request).filter(
    ([k, v]) => k !== listKey && v !== undefined && typeof v !== 'function' && typeof v !== 'symbol',
  );
}

function requestChars(s: MeterState, request: Request, listKey: string | undefined, items: readonly unknown[]): number {
  const entries: [string, number][] = otherValues(request, listKey).map(([k, v]) => [
    k,
    typeof v === 'object' && v !== null ? s.measures.entry(v).chars : serializedChars(v),
  ]);
  // serializedArrayChars of the item sizes, from their running sum.
  if (listKey !== undefined)
    entries.push([
      listKey,
      items.length === 0 ? 2 : 2 + cumulative(s, items)[items.length - 1]! + 2 * (items.length - 1),
    ]);
  return serializedObjectChars(entries);
}

function requestTokens(
  s: MeterState,
  request: Request,
  listKey: string | undefined,
  items: readonly unknown[],
): number | undefined {
  if (s.counter === undefined) return undefined;
  let total = 1;
  for (const [k, v] of otherValues(request, listKey)) total += (tokensOf(s, v) ?? 0) + s.counter.count(`"${k}":`);
  if (listKey !== undefined) for (const it of items) total += tokensOf(s, it) ?? 0;
  return total;
}

/** Create a meter; hold one per session (per subscription). */
export function createMeter(options: MeterOptions = {}): Meter {
  const given = options.measures;
  // A shared memo is read when it keeps a content index and counts with the same counter.
  const usable = given?.byContent === true && (options.counter === undefined || given.counter === options.counter);
  const measures =
    (usable ? given : undefined) ??
    createItemMeasures({
      ...(options.counter === undefined ? {} : { counter: options.counter }),
      ...(options.recognitions === undefined ? {} : { recognitions: options.recognitions }),
    });
  const s: MeterState = {
    counter: options.counter?.exact === true ? options.counter : undefined,
    measures,
    lists: options.lists,
    charSums: [],
    pairSums: undefined,
  };
  return {
    measure: (item) => measures.entry(item),
    tokens: (item) => tokensOf(s, item),
    requestChars: (request, listKey, items) => requestChars(s, request, listKey, items),
    requestTokens: (request, listKey, items) => requestTokens(s, request, listKey, items),
    digests: measures.digests,
    cumulativeChars: (items) => cumulative(s, items),
    changedTokens: (raw, candidate) => changedTokens(s, raw, candidate),
    get size() {
      return measures.size;
    },
  };
}
