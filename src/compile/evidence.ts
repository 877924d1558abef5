/**
 * Turning tool evidence into receipts through the vault, memoized per session: the same content
 * is written (and read back) once, and every later request reuses the verified artifact id.
 *
 * Delivery is the commit point. A receipt leaves a request stage only after {@link
 * EvidenceStore.deliver} pinned its artifact for the session and read it back in the vault's
 * write transaction (under the lock retention takes); an id that comes back missing is forgotten
 * by the memo and the stage falls back to the inline content it still has. A memoized delivery is
 * reused only while the session's pin epoch is unchanged (one small row read per request): once
 * retention released the session's pins (closed, or idle past the TTL), or the vault cannot even
 * be read, every id is delivered again before it is named.
 */
import { createDigests, type Digests } from '../ledger/digests.js';
import { canonicalJson, codePoints } from '../measure/index.js';
import { createReceipt, isReceipt, renderReceipt } from '../receipts/index.js';
import type { KnownContent, LeaseStore, StoreScope } from '../vault/ports.js';
import type { RequestStore } from '../vault/scoped-reads.js';

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

/** Length in code points of a tool output's content as vaulted (0 when it is not receiptable). */
export function evidenceChars(value: unknown): number {
  if (typeof value === 'string') return codePoints(value);
  const text = evidenceText(value);
  return text === undefined ? 0 : codePoints(text);
}

export interface EvidenceStore {
  /** Vault `text` and return its receipt (memoized by content). Throws what the vault throws. */
  receipt(
    text: string,
    meta: {
      readonly toolName: string;
      readonly args?: unknown;
      readonly sessionId: string;
      readonly callId?: string;
      readonly scope?: StoreScope;
    },
  ): Promise<Receipted>;
  /**
   * What {@link receipt} resolves with, without a promise, when the text is one the store holds as
   * a lookup key (vaulted or named by this request or the one before it); else undefined.
   */
  knownReceipt(text: string, toolName: string): Receipted | undefined;
  /** Vault arbitrary text (collapsed steps) and return its artifact id and size. */
  store(
    text: string,
    sessionId: string,
    toolName: string,
  ): Promise<{ readonly artifactId: string; readonly chars: number }>;
  /**
   * Deliver the artifacts the receipts of a request about to leave name: pinned for the scope's
   * session and read back under the vault's lock (see the module comment). Resolves with the ids
   * that are gone: no receipt may name them, and the memo forgets them. Throws what the vault throws.
   */
  deliver(ids: readonly string[], scope: StoreScope): Promise<readonly string[]>;
  /** {@link deliver} for the scope the store was last delivered with; throws when an id is gone. */
  pin(ids: readonly string[]): Promise<void>;
  /** True when a delivery found this artifact gone and no put has stored it again since. */
  isGone(artifactId: string): boolean;
  /** How many artifacts {@link isGone} is true for (0: a memoized receipt of this store may be named again). */
  readonly goneCount: number;
  /** A request is being reduced, in this scope (its tenant, session and lock budget): every put and delivery of it uses it, and the text lookup moves on a generation. */
  begin(scope: StoreScope): void;
}

/** How long a session reusing memoized deliveries goes without touching its vault row (keeps it from looking idle). */
const TOUCH_EVERY_MS = 30_000;

/** Chars of evidence texts a store keeps as lookup keys (per session). */
const MAX_TEXT_CHARS = 32 * 1024 * 1024;

/** Options of {@link createEvidenceStore}; every field is optional. */
export interface EvidenceStoreOptions {
  /**
   * Bound of the content → artifact memo (entries).
   *
   * @defaultValue 10,000
   */
  readonly maxEntries?: number;
  /**
   * The digest ledger the texts are named by (the session meter's): its digest is the memo key and
   * is handed to the vault's put, so a text the request stages already hashed is not hashed again.
   *
   * @defaultValue a ledger of the store's own
   */
  readonly digests?: Digests;
}

/** One store per session (per subscription). */
export function createEvidenceStore(
  vault: Pick<RequestStore, 'put'> & LeaseStore,
  options: EvidenceStoreOptions = {},
): EvidenceStore {
  const maxEntries = options.maxEntries ?? 10_000;
  const digests = options.digests ?? createDigests();
  type Entry = { artifactId: string; sha256: string; chars: number };
  const known = new Map<string, Entry>();
  /** Artifact id → memo key, to forget an id that turned out gone. */
  const keyOf = new Map<string, string>();
  // The texts themselves, for the requests that hand the same string over again (a rewrite's
  // evidence is vaulted once but named by every later request): a lookup instead of a SHA-256.
  // Two generations: the texts of the request being reduced and of the one before it. A text no
  // request named for two requests in a row is dropped, so what is held follows what the host
  // still sends (a sliding window does not accumulate every output the session ever had); bounded
  // in count and chars as well.
  let byText = new Map<string, Entry>();
  let previousTexts = new Map<string, Entry>();
  let textChars = 0;
  let previousChars = 0;
  const dropOldest = (): void => {
    const from = previousTexts.size > 0 ? previousTexts : byText;
    const oldest = from.keys().next().value as string;
    from.delete(oldest);
    if (from === previousTexts) previousChars -= oldest.length;
    else textChars -= oldest.length;
  };
  const remember = (text: string, entry: Entry): void => {
    if (byText.has(text)) return;
    if (previousTexts.delete(text)) previousChars -= text.length;
    byText.set(text, entry);
    textChars += text.length;
    while (byText.size + previousTexts.size > maxEntries || textChars + previousChars > MAX_TEXT_CHARS) dropOldest();
  };
  const lookup = (text: string): Entry | undefined => {
    const same = byText.get(text) ?? previousTexts.get(text);
    if (same !== undefined) remember(text, same);
    return same;
  };
  /** A new request: the texts of the one before become the older generation. */
  const nextRequest = (): void => {
    if (byText.size === 0) return; // a request that named no evidence keeps both generations
    previousTexts = byText;
    previousChars = textChars;
    byText = new Map();
    textChars = 0;
  };
  const rendered = new WeakMap<Entry, Map<string, Receipted>>();
  /** Ids delivered under `epoch` (the session's pins as this store last saw them). */
  const delivered = new Set<string>();
  const gone = new Set<string>();
  let epoch: string | undefined;
  let touchedAt = 0;
  let lastScope: StoreScope | undefined;
  const put = async (
    text: string,
    meta: { toolName: string; args?: unknown; sessionId: string; callId?: string; scope?: StoreScope },
  ) => {
    const same = lookup(text);
    if (same !== undefined) return same;
    const key = digests.of(text);
    const hit = known.get(key);
    if (hit !== undefined) {
      remember(text, hit);
      return hit;
    }
    const result = await vault.put(
      {
        content: text,
        toolName: meta.toolName,
        args: meta.args ?? {},
        sessionId: meta.sessionId,
        ...(meta.callId === undefined ? {} : { callId: meta.callId }),
        digest: key,
      },
      meta.scope ?? lastScope,
    );
    const entry = { artifactId: result.artifactId, sha256: result.sha256, chars: result.chars };
    known.set(key, entry);
    keyOf.set(entry.artifactId, key);
    gone.delete(entry.artifactId);
    if (known.size > maxEntries) {
      const oldest = known.keys().next().value as string;
      const id = known.get(oldest)?.artifactId;
      known.delete(oldest);
      if (id !== undefined && keyOf.get(id) === oldest) keyOf.delete(id);
    }
    remember(text, entry);
    return entry;
  };
  const forget = (id: string): void => {
    delivered.delete(id);
    gone.add(id);
    const key = keyOf.get(id);
    if (key !== undefined) known.delete(key);
    keyOf.delete(id);
    // Rare (the artifact was pruned or damaged): the next put of the text stores it again.
    for (const [text, entry] of byText) {
      if (entry.artifactId !== id) continue;
      byText.delete(text);
      textChars -= text.length;
    }
    for (const [text, entry] of previousTexts) {
      if (entry.artifactId !== id) continue;
      previousTexts.delete(text);
      previousChars -= text.length;
    }
  };
  /** The texts this store holds for `ids`, with their digests: the delivery compares them instead of hashing. */
  const knownContents = (ids: readonly string[]): Map<string, KnownContent> | undefined => {
    const wanted = new Set(ids);
    const out = new Map<string, KnownContent>();
    for (const texts of [byText, previousTexts])
      for (const [content, e] of texts)
        if (wanted.has(e.artifactId) && !out.has(e.artifactId)) out.set(e.artifactId, { content, sha256: e.sha256 });
    // An id another stage put (a receipt in the request's text) whose text the shared ledger hashed.
    for (const id of wanted) {
      const known = out.has(id) ? undefined : digests.known(id);
      if (known !== undefined) out.set(id, known);
    }
    return out.size === 0 ? undefined : out;
  };
  const deliver = async (ids: readonly string[], scope: StoreScope): Promise<readonly string[]> => {
    lastScope = scope;
    const want = [...new Set(ids)];
    let fresh = want.filter((id) => !delivered.has(id));
    if (fresh.length === 0) {
      // Everything was delivered before: valid while the session still holds those pins.
      if (epoch !== undefined && Date.now() - touchedAt < TOUCH_EVERY_MS) {
        const pins = await vault.sessionPins(scope);
        if (pins !== undefined && pins.epoch === epoch && !pins.closed) return [];
      }
      fresh = want;
    }
    let result = await vault.deliver(fresh, scope, knownContents(fresh));
    const missing = new Set(result.missing);
    if (epoch !== undefined && result.epoch !== epoch) {
      // The session's earlier pins were released: whatever this request names is delivered again.
      delivered.clear();
      const rest = want.filter((id) => !fresh.includes(id));
      if (rest.length > 0) {
        result = await vault.deliver(rest, scope, knownContents(rest));
        for (const id of result.missing) missing.add(id);
      }
    }
    epoch = result.epoch;
    touchedAt = Date.now();
    for (const id of want) {
      if (missing.has(id)) forget(id);
      else delivered.add(id);
    }
    // Bounded like the content memo: an id dropped here is simply delivered again when named.
    while (delivered.size > maxEntries) delivered.delete(delivered.values().next().value as string);
    return [...missing];
  };
  /** The rendered receipt per tool name, kept with the entry (a rewrite names it in every later request). */
  const receiptOf = (e: Entry, toolName: string): Receipted => {
    const shown = (rendered.get(e) ?? rendered.set(e, new Map()).get(e)!) as Map<string, Receipted>;
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
  };
  return {
    async receipt(text, meta) {
      return receiptOf(await put(text, meta), meta.toolName);
    },
    knownReceipt(text, toolName) {
      const same = lookup(text);
      return same === undefined ? undefined : receiptOf(same, toolName);
    },
    async store(text, sessionId, toolName) {
      const e = await put(text, { toolName, sessionId });
      return { artifactId: e.artifactId, chars: e.chars };
    },
    deliver,
    async pin(ids) {
      const missing = await deliver(ids, lastScope ?? {});
      if (missing.length > 0) throw new Error(`artifact ${missing[0]} is gone`);
    },
    isGone: (id) => gone.has(id),
    get goneCount() {
      return gone.size;
    },
    begin(scope) {
      lastScope = scope;
      nextRequest();
    },
  };
}
