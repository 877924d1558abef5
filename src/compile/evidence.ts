/**
 * Turning tool evidence into receipts through the vault, memoized per session: the same content
 * is written (and read back) once, and every later request reuses the verified artifact id.
 * Delivery is the commit point (docs/how-it-works.md): an id {@link EvidenceStore.deliver} finds
 * missing is forgotten and the stage falls back to the inline content it still has. A memoized
 * delivery is reused only while the session's pin epoch is unchanged (one small row read per
 * request): once retention released the session's pins, or the vault cannot even be read, every id
 * is delivered again before it is named.
 */
import type { Digests } from '../ledger/digests.js';
import { canonicalJson } from '../measure/index.js';
import { sharedLead } from '../model/prefix.js';
import { createReceipt, isReceipt, renderReceipt } from '../receipts/index.js';
import type { KnownContent, LeaseStore, StoreScope } from '../vault/ports.js';
import type { RequestStore } from '../vault/scoped-reads.js';
import type { PutResult } from '../vault/types.js';

/** What a receipted value became. */
export interface Receipted {
  readonly text: string;
  readonly artifactId: string;
  /** True when the vault wrote the artifact and read it back (put resolves only then). */
  readonly verified: boolean;
}

const TEXT_TYPES = new Set(['text', 'input_text', 'output_text']);

/**
 * The exact text a tool output's content is vaulted as: a string as is, a list of text-only parts
 * as its canonical JSON. Undefined for anything else (images and files stay inline: multimodal
 * parts are never receipted) and for contents that already are a receipt.
 */
export function evidenceText(value: unknown): string | undefined {
  if (typeof value === 'string') return isReceipt(value) ? undefined : value;
  if (!Array.isArray(value) || value.length === 0) return undefined;
  for (const part of value) {
    if (typeof part !== 'object' || part === null || !TEXT_TYPES.has((part as { type?: string }).type ?? ''))
      return undefined;
  }
  return canonicalJson(value);
}

type PutMeta = {
  readonly toolName: string;
  readonly args?: unknown;
  readonly sessionId: string;
  readonly callId?: string;
  readonly scope?: StoreScope;
};

/** A text to receipt and its provenance. */
export type EvidenceItem = { readonly text: string; readonly meta: PutMeta };

export interface EvidenceStore {
  /** Vault `text` and return its receipt (memoized by content). Throws what the vault throws. */
  receipt(text: string, meta: PutMeta): Promise<Receipted>;
  /** {@link receipt} of each item, in order, the new texts stored in one write; a text the vault refused is its error. */
  receipts(items: readonly EvidenceItem[]): Promise<(Receipted | Error)[]>;
  /**
   * Deliver the artifacts the receipts of a request about to leave name: pinned for the scope's
   * session and read back under the vault's lock (see the module comment). Resolves with the ids
   * that are gone: no receipt may name them, and the memo forgets them. Throws what the vault throws.
   */
  deliver(ids: readonly string[], scope: StoreScope): Promise<readonly string[]>;
  /** True when a delivery found this artifact gone and no put has stored it again since. */
  isGone(artifactId: string): boolean;
  /** True when {@link isGone} names some artifact (else every receipt may be reused). */
  anyGone(): boolean;
  /** A request is being reduced, in this scope (its tenant, session and lock budget): every put and delivery of it uses it, and the text lookup moves on a generation. */
  begin(scope: StoreScope): void;
}

/** How long a session reusing memoized deliveries goes without touching its vault row (keeps it from looking idle). */
const TOUCH_EVERY_MS = 30_000;

/** Chars of evidence texts a store keeps as lookup keys (per session). */
const MAX_TEXT_CHARS = 32 * 1024 * 1024;
/** Bound of the content → artifact memo (entries). */
const MAX_ENTRIES = 10_000;

type Entry = { artifactId: string; sha256: string; chars: number };
/** The evidence texts one request named, and their characters. */
type Generation = { readonly texts: Map<string, Entry>; chars: number };
type EvidenceVault = Pick<RequestStore, 'put' | 'putMany'> & LeaseStore;

/** One evidence store's state (one per session). */
interface EvidenceState {
  readonly vault: EvidenceVault;
  readonly digests: Digests;
  readonly known: Map<string, Entry>;
  /** Artifact id → memo key, to forget an id that turned out gone. */
  readonly keyOf: Map<string, string>;
  // The texts themselves (a lookup instead of a SHA-256), in two generations: the request being
  // reduced and the one before it. A text no request named for two requests in a row is dropped,
  // so what is held follows what the host still sends; bounded in count and chars as well.
  current: Generation;
  previous: Generation;
  readonly rendered: WeakMap<Entry, Map<string, Receipted>>;
  /** Ids delivered under `epoch` (the session's pins as this store last saw them). */
  readonly delivered: Set<string>;
  /** A copy of the ids of the last delivery while every one of them is in `delivered`. */
  lastIds: readonly string[];
  readonly gone: Set<string>;
  epoch: string | undefined;
  touchedAt: number;
  lastScope: StoreScope | undefined;
}

function dropOldest(s: EvidenceState): void {
  const from = s.previous.texts.size > 0 ? s.previous : s.current;
  const oldest = from.texts.keys().next().value as string;
  from.texts.delete(oldest);
  from.chars -= oldest.length;
}

function remember(s: EvidenceState, text: string, entry: Entry): void {
  const { current, previous } = s;
  if (current.texts.has(text)) return;
  if (previous.texts.delete(text)) previous.chars -= text.length;
  current.texts.set(text, entry);
  current.chars += text.length;
  while (current.texts.size + previous.texts.size > MAX_ENTRIES || current.chars + previous.chars > MAX_TEXT_CHARS)
    dropOldest(s);
}

function lookup(s: EvidenceState, text: string): Entry | undefined {
  const same = s.current.texts.get(text) ?? s.previous.texts.get(text);
  if (same !== undefined) remember(s, text, same);
  return same;
}

/** A new request: the texts of the one before become the older generation. */
function nextRequest(s: EvidenceState): void {
  if (s.current.texts.size === 0) return; // a request that named no evidence keeps both generations
  s.previous = s.current;
  s.current = { texts: new Map(), chars: 0 };
}

/** What the memo already holds for `text` (remembered for this request), else its ledger digest to store it under. */
function held(s: EvidenceState, text: string): Entry | string {
  const same = lookup(s, text);
  if (same !== undefined) return same;
  const key = s.digests.of(text);
  const hit = s.known.get(key);
  if (hit !== undefined) remember(s, text, hit);
  return hit ?? key;
}

function stored(s: EvidenceState, text: string, key: string, result: PutResult | Error): Entry | Error {
  if (result instanceof Error) return result;
  const entry = { artifactId: result.artifactId, sha256: result.sha256, chars: result.chars };
  s.known.set(key, entry);
  s.keyOf.set(entry.artifactId, key);
  s.gone.delete(entry.artifactId);
  if (s.known.size > MAX_ENTRIES) {
    const oldest = s.known.keys().next().value as string;
    const id = s.known.get(oldest)?.artifactId;
    s.known.delete(oldest);
    if (id !== undefined && s.keyOf.get(id) === oldest) s.keyOf.delete(id);
  }
  remember(s, text, entry);
  return entry;
}

/** The entries of `items`, in order; the new texts stored once each, several in one putMany, in the first one's scope. */
async function putEvidence(s: EvidenceState, items: readonly EvidenceItem[]): Promise<(Entry | Error)[]> {
  const out: (Entry | Error | string)[] = items.map(({ text }) => held(s, text));
  const first = new Map<string, number>(); // digest → the item that stores it
  out.forEach((key, k) => typeof key === 'string' && !first.has(key) && first.set(key, k));
  const inputs = [...first].map(([digest, k]) => {
    const { scope: _, ...meta } = items[k]!.meta;
    return { ...meta, args: meta.args ?? {}, content: items[k]!.text, digest };
  });
  const scope = items[first.values().next().value ?? 0]?.meta.scope ?? s.lastScope;
  const results: (PutResult | Error)[] = [];
  if (s.vault.putMany !== undefined && inputs.length > 1)
    results.push(...(await s.vault.putMany(inputs, scope).catch((e: Error) => inputs.map(() => e))));
  else for (const input of inputs) results.push(await s.vault.put(input, scope).catch((e: Error) => e));
  [...first].forEach(([key, k], j) => (out[k] = stored(s, items[k]!.text, key, results[j]!)));
  return out.map((o) => (typeof o === 'string' ? out[first.get(o)!]! : o)) as (Entry | Error)[];
}

function forget(s: EvidenceState, id: string): void {
  s.delivered.delete(id);
  s.gone.add(id);
  const key = s.keyOf.get(id);
  if (key !== undefined) s.known.delete(key);
  s.keyOf.delete(id);
  // Rare (the artifact was pruned or damaged): the next put of the text stores it again.
  for (const g of [s.current, s.previous])
    for (const [text, entry] of g.texts) {
      if (entry.artifactId !== id) continue;
      g.texts.delete(text);
      g.chars -= text.length;
    }
}

/** The texts this store holds for `ids`, with their digests: the delivery compares them instead of hashing. */
function knownContents(s: EvidenceState, ids: readonly string[]): Map<string, KnownContent> | undefined {
  const out = new Map<string, KnownContent>();
  const rest = new Set<string>();
  // Most from the shared ledger (a lookup per id); the texts held here are walked only for the others.
  for (const id of ids) {
    const known = s.digests.known(id);
    if (known !== undefined) out.set(id, known);
    else rest.add(id);
  }
  for (const { texts } of rest.size === 0 ? [] : [s.current, s.previous])
    for (const [content, e] of texts)
      if (rest.has(e.artifactId) && !out.has(e.artifactId)) out.set(e.artifactId, { content, sha256: e.sha256 });
  return out.size === 0 ? undefined : out;
}

async function deliver(s: EvidenceState, ids: readonly string[], scope: StoreScope): Promise<readonly string[]> {
  s.lastScope = scope;
  // The ids not delivered yet, in order, once each: one lookup per id (a long history names every
  // receipt of it again, delivered long ago); the whole list deduplicated only when it is needed.
  // The leading run the last delivery named is delivered (only a delivery forgets or evicts one).
  const last = s.lastIds;
  s.lastIds = []; // until this delivery succeeds
  let fresh: string[] = [];
  const named = new Set<string>();
  for (let k = sharedLead(ids, last, undefined); k < ids.length; k++) {
    const id = ids[k]!;
    if (s.delivered.has(id) || named.has(id)) continue;
    named.add(id);
    fresh.push(id);
  }
  let wanted: string[] | undefined;
  const wantAll = (): string[] => (wanted ??= [...new Set(ids)]);
  if (fresh.length === 0 && s.epoch !== undefined) {
    // Everything was delivered before: valid while the session still holds those pins.
    if (Date.now() - s.touchedAt < TOUCH_EVERY_MS) {
      const pins = await s.vault.sessionPins(scope);
      if (pins !== undefined && pins.epoch === s.epoch && !pins.closed) {
        s.lastIds = ids.slice();
        return [];
      }
    } else {
      // Kept alive by an empty delivery: an unchanged epoch means nothing pinned was released, so
      // the artifacts need not be read back again (a long session named them all).
      const touched = await s.vault.deliver([], scope);
      if (touched.epoch === s.epoch) {
        s.touchedAt = Date.now();
        s.lastIds = ids.slice();
        return [];
      }
    }
  }
  if (fresh.length === 0) fresh = wantAll();
  let result = await s.vault.deliver(fresh, scope, knownContents(s, fresh));
  const missing = new Set(result.missing);
  // The ids delivered now; the others were delivered under this epoch before and stay so.
  let sent = fresh;
  if (s.epoch !== undefined && result.epoch !== s.epoch) {
    // The session's earlier pins were released: whatever this request names is delivered again.
    s.delivered.clear();
    sent = wantAll();
    const freshSet = new Set(fresh);
    const rest = sent.filter((id) => !freshSet.has(id));
    if (rest.length > 0) {
      result = await s.vault.deliver(rest, scope, knownContents(s, rest));
      for (const id of result.missing) missing.add(id);
    }
  }
  s.epoch = result.epoch;
  s.touchedAt = Date.now();
  for (const id of sent) {
    if (missing.has(id)) forget(s, id);
    else s.delivered.add(id);
  }
  // Bounded like the content memo: an id dropped here is simply delivered again when named.
  s.lastIds = missing.size === 0 && s.delivered.size <= MAX_ENTRIES ? ids.slice() : [];
  while (s.delivered.size > MAX_ENTRIES) s.delivered.delete(s.delivered.values().next().value as string);
  return [...missing];
}

/** The rendered receipt per tool name, kept with the entry (a rewrite names it in every later request). */
function receiptOf(s: EvidenceState, e: Entry, toolName: string): Receipted {
  const shown = (s.rendered.get(e) ?? s.rendered.set(e, new Map()).get(e)!) as Map<string, Receipted>;
  let r = shown.get(toolName);
  if (r === undefined)
    shown.set(
      toolName,
      (r = Object.freeze({
        text: renderReceipt(createReceipt(e.artifactId, toolName, e.chars, e.sha256)),
        artifactId: e.artifactId,
        verified: true as const,
      })),
    );
  return r;
}

/** One store per session (per subscription); `digests`: the session meter's ledger, which keys and puts the texts. */
export function createEvidenceStore(vault: EvidenceVault, digests: Digests): EvidenceStore {
  const s: EvidenceState = {
    vault,
    digests,
    known: new Map(),
    keyOf: new Map(),
    current: { texts: new Map(), chars: 0 },
    previous: { texts: new Map(), chars: 0 },
    rendered: new WeakMap(),
    delivered: new Set(),
    lastIds: [],
    gone: new Set(),
    epoch: undefined,
    touchedAt: 0,
    lastScope: undefined,
  };
  return {
    receipt: (text, meta) =>
      putEvidence(s, [{ text, meta }]).then(([e]) =>
        e instanceof Error ? Promise.reject(e) : receiptOf(s, e!, meta.toolName),
      ),
    receipts: async (items) =>
      (await putEvidence(s, items)).map((e, k) => (e instanceof Error ? e : receiptOf(s, e, items[k]!.meta.toolName))),
    deliver: (ids, scope) => deliver(s, ids, scope),
    isGone: (id) => s.gone.has(id),
    anyGone: () => s.gone.size > 0,
    begin(scope) {
      s.lastScope = scope;
      nextRequest(s);
    },
  };
}
