/**
 * Recognising the history a session already sent, without re-serializing or re-hashing it.
 *
 * The request stages' memos are keyed by object identity, so a host that rebuilds its message
 * objects (every request over HTTP, framework conversions) would have its whole history serialized
 * and hashed on every request. Here each item is compared with the one at the same position of the
 * session's previous request (a structural walk that stops at the first difference, far cheaper
 * than serializing or hashing) and an equal one is replaced by that earlier object, so every
 * identity memo downstream hits. Equal top-level values (tools, instructions) are recognised alike.
 *
 * The stages work on the recognised request and hand their output back through `restore`, which
 * puts the caller's own objects back: outputs are exactly what they were. Equalities are also
 * recorded in the shared {@link Recognitions}, so a later stage or meter finds them without
 * comparing again. Like every identity memo, this assumes a sent message object is not mutated.
 */
import { Lineage } from '../lineage.js';
import { extendView, isObj, readRequest } from './read.js';
import type { RequestView } from './types.js';
import type { RequestFormat } from '../step.js';
import { WeakMemo } from '../weak-memo.js';

type Obj = Record<string, unknown>;

/**
 * A recognised list, position by position: what the caller handed over and what it was recognised
 * as. Recorded in the weak map of {@link Recognitions} only when lookups ask for it (recording
 * every item of every request cost more than recognising it).
 */
export interface Recognition {
  readonly caller: readonly unknown[];
  readonly known: readonly unknown[];
  /** The request memo that recognised it (its {@link RequestMemo.lists}). */
  readonly memo: object;
  published: boolean;
  /** Lookups answered by scanning `caller` (see {@link Recognitions.canonicalOf}). */
  scans: number;
}
/** Recognitions kept: the latest of each of the last few request memos (a session has one per stage). */
const RECENT_KEPT = 4;

/**
 * Lookups a recognition answers by scanning its caller list (one native `indexOf`) before it is
 * recorded in the weak map: a request asks for a handful of objects it does not hold, and recording
 * a 3,000-item history for them cost 6,000 weak-map writes per request.
 */
const SCANS_BEFORE_PUBLISHING = 16;

/** Counts (for tests and benchmarks): requests and items seen, items found equal by comparison, views grown. */
export interface RecognitionStats {
  readonly requests: number;
  readonly items: number;
  readonly compared: number;
  readonly extended: number;
}

/**
 * The equalities the request stages recognised, shared by the stages, the item measures and the
 * output-budget counter of one Terminator. Weak by caller object, and the recent lists bounded.
 *
 * @example
 * const recognitions = new Recognitions();
 * const memo = createRequestMemo({ recognitions });
 * recognitions.canonicalOf(message); // the earlier equal object a request memo recognised, else `message`
 */
export class Recognitions {
  /** Caller object → the earlier object it was found equal to (its content's first-seen object). */
  readonly #earlier = new WeakMemo<object, object>();
  #recent: Recognition[] = [];
  readonly #counts = { requests: 0, items: 0, compared: 0, extended: 0 };

  /** A copy of the counts so far. */
  stats(): RecognitionStats {
    return { ...this.#counts };
  }

  /** The earlier object `value` was recognised as equal to, else `value` itself. */
  canonicalOf<T>(value: T): T {
    if (typeof value !== 'object' || value === null) return value;
    const known = this.#earlier.get(value) as T | undefined;
    if (known !== undefined) return known;
    for (const r of this.#recent) {
      if (r.published) continue;
      if (r.scans < SCANS_BEFORE_PUBLISHING) {
        r.scans++;
        // From the end: the objects asked for are mostly the newest items.
        const i = r.caller.lastIndexOf(value);
        if (i >= 0) return r.known[i] as T;
        continue;
      }
      this.#publish(r);
      const found = this.#earlier.get(value) as T | undefined;
      if (found !== undefined) return found;
    }
    return value;
  }

  /** @internal Record that `value` equals the earlier `before`. */
  recordEqual(value: object, before: object): void {
    this.#counts.compared++;
    this.#earlier.set(value, before);
  }

  /** @internal Count one request recognised (`items` in its list, `compared` of them found equal unrecorded, its view `extended`). */
  countRequest(items: number, compared: number, extended: boolean): void {
    this.#counts.requests++;
    this.#counts.items += items;
    this.#counts.compared += compared;
    if (extended) this.#counts.extended++;
  }

  /** @internal The latest recognition of a list that starts with the caller's first item (an earlier stage's of this request). */
  recognitionOf(given: readonly unknown[]): Recognition | undefined {
    if (given.length === 0) return undefined;
    for (const r of this.#recent) if (r.caller[0] === given[0]) return r;
    return undefined;
  }

  /** @internal The caller's objects of `memo`'s latest recognised list, while kept and that list is `known`. */
  callersOf(memo: object, known: readonly unknown[]): readonly unknown[] | undefined {
    for (const r of this.#recent) if (r.memo === memo) return r.known === known ? r.caller : undefined;
    return undefined;
  }

  /** @internal Keep a list's recognition (caller's objects, known ones) in place of `memo`'s previous one: a host's objects are held until `memo`'s next request (the comparison there reads them), or until the recognitions of RECENT_KEPT − 1 newer memos push them out. */
  remember(caller: readonly unknown[], known: readonly unknown[], memo: object): void {
    const others = this.#recent.filter((r) => r.memo !== memo).slice(0, RECENT_KEPT - 1);
    this.#recent = [{ caller, known, memo, published: false, scans: 0 }, ...others];
  }

  /** Record a recognition in the weak map. */
  #publish(r: Recognition): void {
    r.published = true;
    for (let i = 0; i < r.caller.length; i++) {
      const c = r.caller[i];
      if (c !== r.known[i] && typeof c === 'object' && c !== null) this.#earlier.set(c, r.known[i] as object);
    }
  }
}

/**
 * Recognised lists (private copies, never changed) of one request memo and how they grew: the
 * previous list and how many leading items the two share, so {@link sharedLead} need not compare
 * them again. Three steps are followed back.
 */
export type RecognisedLists = Lineage<
  readonly unknown[],
  { readonly base: readonly unknown[]; readonly shared: number }
>;

/**
 * How many leading items `items` shares with `base` (the same objects): the whole shared run, or,
 * for recognised lists of `lists`, a leading run their lineage found shared. Every item before the
 * answer is shared; nothing is said about the item after it.
 */
export function sharedLead(
  items: readonly unknown[],
  base: readonly unknown[],
  lists: RecognisedLists | undefined,
): number {
  if (items === base) return items.length;
  let shared = Math.min(items.length, base.length);
  let list = items;
  for (let step = 0; lists !== undefined && step < lists.steps; step++) {
    const parent = lists.get(list);
    if (parent === undefined) break;
    shared = Math.min(shared, parent.shared);
    if (parent.base === base) return shared;
    list = parent.base;
  }
  const n = Math.min(items.length, base.length);
  let i = 0;
  while (i < n && items[i] === base[i]) i++;
  return i;
}

/** Whether `items` is a list recognised by the memo whose `lists` are given (a private copy no caller mutates): safe to keep by reference. */
export function isRecognisedList(items: readonly unknown[], lists: RecognisedLists | undefined): boolean {
  return lists?.has(items) ?? false;
}

const plainProto = (v: object): boolean => {
  const p: unknown = Object.getPrototypeOf(v);
  return p === Object.prototype || p === null;
};

/**
 * True when `a` and `b` serialize to the same JSON text (JSON.stringify and canonicalJson alike):
 * same arrays, plain objects with the same keys in the same order, the same primitives. Anything
 * else (class instances, functions, NaN) is equal only to itself.
 */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return sameIdentical(a, b);
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!sameMember(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b) || !plainProto(a) || !plainProto(b)) return false;
  // Own keys only: for…in lists them first, then any an Object.prototype was given (one array, not two).
  const ka = Object.keys(a);
  let i = 0;
  for (const k in b) {
    if (!Object.prototype.hasOwnProperty.call(b, k)) break;
    if (k !== ka[i++] || !sameMember((a as Obj)[k], (b as Obj)[k])) return false;
  }
  return i === ka.length;
}

/** Two `===` values serialize alike unless they are 0 and -0. */
const sameIdentical = (x: unknown, y: unknown): boolean => typeof x !== 'number' || x !== 0 || Object.is(x, y);

/** {@link sameJson} of two members, with the usual case (the same primitive) decided here rather than by a call. */
const sameMember = (x: unknown, y: unknown): boolean => (x === y ? sameIdentical(x, y) : sameJson(x, y));

/** Two distinct objects that serialize alike (a value too deep to walk is left to the full path). */
function sameItem(value: unknown, before: unknown): boolean {
  if (typeof value !== 'object' || value === null || typeof before !== 'object' || before === null) return false;
  try {
    return sameJson(value, before);
  } catch {
    return false;
  }
}

/** `value`, or `before` when the two are equal (a top-level value), recorded in the weak map of `shared`. */
function intern(shared: Recognitions, value: unknown, before: unknown): unknown {
  if (value === before || !sameItem(value, before)) return value;
  shared.recordEqual(value as object, before as object);
  return before;
}

/** One request as the stages see it. */
export interface Recognised {
  /** The request with recognised values replaced by the earlier equal objects: read, plan and measure on this. */
  readonly request: Readonly<Obj>;
  /** readRequest(request), built from the previous view when the list only grew. */
  readonly view: RequestView;
  /** Leading conversation items the previous request had (the same objects after recognition). */
  readonly shared: number;
  /** `out` (built from `request`) with the caller's own objects wherever `request` holds an earlier one. */
  restore<T>(out: T): T;
}

/** Per-session recognition state: the previous request's recognised values and view. */
export interface RequestMemo {
  /** `format`: the wire format the host named (StepContext.format); detected when absent. */
  recognise(request: Readonly<Obj>, format?: RequestFormat): Recognised;
  /** Conversation items held for the comparison (the previous request's). */
  readonly heldItems: number;
  /** The lists this memo recognised and how they grew (for {@link sharedLead}). */
  readonly lists: RecognisedLists;
}

/** Which key of a request holds its conversation list (`messages`, else the Responses API's `input`), if any. */
export const listKeyOf = (request: Readonly<Obj>): 'messages' | 'input' | undefined =>
  Array.isArray(request['messages']) ? 'messages' : Array.isArray(request['input']) ? 'input' : undefined;

/** Options of {@link createRequestMemo}. */
export interface RequestMemoOptions {
  /**
   * Recognise the history the previous request sent; false: every request takes the full path
   * (what tests and benchmarks compare the fast path with).
   *
   * @defaultValue `true`
   */
  readonly recognise?: boolean;
  /**
   * Where recognised equalities are recorded for the other stages, the item measures and the
   * output-budget counter (the runtime's, shared by its stages).
   *
   * @defaultValue a new one, this memo's own
   */
  readonly recognitions?: Recognitions;
}

/** One memo per session of one stage (held in its SessionState). */
export function createRequestMemo(options: RequestMemoOptions = {}): RequestMemo {
  const enabled = options.recognise ?? true;
  const recognitions = options.recognitions ?? new Recognitions();
  // The link past the ones sharedLead follows is cut (src/lineage.ts).
  const grownFrom: RecognisedLists = new Lineage(3, (link) => link.base);
  let items: readonly unknown[] = [];
  let top = new Map<string, unknown>();
  let view: RequestView | undefined;
  return {
    get heldItems() {
      return items.length;
    },
    lists: grownFrom,
    recognise(caller, format) {
      const read = format === undefined ? {} : { format };
      if (!enabled) return { request: caller, view: readRequest(caller, read), shared: 0, restore: (out) => out };
      const listKey = listKeyOf(caller);
      let request: Obj | undefined;
      const nextTop = new Map<string, unknown>();
      for (const key of Object.keys(caller)) {
        if (key === listKey) continue;
        const value = caller[key];
        const known = intern(recognitions, value, top.get(key));
        nextTop.set(key, known);
        if (known !== value) (request ??= { ...caller })[key] = known;
      }
      let shared = 0;
      let compared = 0;
      let list: readonly unknown[] = [];
      if (listKey !== undefined) {
        // A private copy: a host may grow its own array in place, and the previous list must stay.
        const given = caller[listKey] as readonly unknown[];
        const copy = given.slice();
        // The caller's objects as recorded for later stages: `copy` itself until an item is found
        // equal by comparison (the known object where an earlier stage's recognition `by` already
        // found it: taken without comparing again, and recorded there).
        let callers: unknown[] | undefined;
        const by = recognitions.recognitionOf(given);
        // The caller's objects of this memo's previous list, position by position, while the
        // recognitions keep them: a rebuilt item is compared with its copy there, allocated a
        // request ago beside the others, rather than with the first-seen object, scattered in old
        // memory (3–4 times slower to walk at turn 200; 5.2 → 3.2–3.9 ms per request at turn 1,000).
        const sent = recognitions.callersOf(grownFrom, items) ?? items;
        for (let i = 0, n = Math.min(copy.length, items.length); i < n; i++) {
          const value = copy[i];
          const before = items[i];
          if (value !== before) {
            if (by !== undefined && by.caller[i] === value && by.known[i] === before) {
              copy[i] = before;
              if (callers !== undefined) callers[i] = before;
            } else if (sameItem(value, sent[i] === value ? before : sent[i])) {
              callers ??= copy.slice();
              copy[i] = before;
              compared++;
            }
          }
          if (shared === i && copy[i] === before) shared++;
        }
        list = copy;
        grownFrom.link(copy, { base: items, shared });
        (request ??= { ...caller })[listKey] = copy;
        recognitions.remember(callers ?? copy, copy, grownFrom);
      }
      const seen = request ?? caller;
      const grown =
        view !== undefined && view.listKey === listKey && shared === view.items.length
          ? extendView(view, seen, read, shared)
          : undefined;
      const next = grown ?? readRequest(seen, read);
      recognitions.countRequest(list.length, compared, grown !== undefined);
      items = list;
      top = nextTop;
      view = next;
      return { request: seen, view: next, shared, restore: (out) => restoreRequest(out, seen, caller, listKey) };
    },
  };
}

/** Put the caller's objects back where `out` holds a value `recognised` substituted. */
function restoreRequest<T>(out: T, recognised: Readonly<Obj>, caller: Readonly<Obj>, listKey: string | undefined): T {
  if ((out as unknown) === recognised) return caller as T;
  if (recognised === caller || !isObj(out)) return out;
  let copy: Obj | undefined;
  for (const key of Object.keys(out)) {
    const value = out[key];
    const substituted = recognised[key];
    let back = value;
    if (value === substituted && substituted !== caller[key]) back = caller[key];
    else if (key === listKey && Array.isArray(value) && Array.isArray(substituted) && Array.isArray(caller[key]))
      back = restoreItems(value, substituted, caller[key] as readonly unknown[]);
    if (back !== value) (copy ??= { ...out })[key] = back;
  }
  return (copy ?? out) as T;
}

function restoreItems(
  out: readonly unknown[],
  recognised: readonly unknown[],
  caller: readonly unknown[],
): readonly unknown[] {
  if (recognised === caller || out.length !== caller.length || recognised.length !== caller.length) return out;
  let i = 0;
  while (i < out.length && (out[i] !== recognised[i] || recognised[i] === caller[i])) i++;
  if (i === out.length) return out;
  // The caller's list with the stage's own items written in: a rebuilt host's every unchanged item is its own.
  const copy = caller.slice();
  for (let j = 0; j < out.length; j++) if (out[j] !== recognised[j]) copy[j] = out[j];
  return copy;
}
