/**
 * The item ledger's digests: the hex SHA-256 of a text's UTF-8 bytes (the vault's content identity:
 * an artifact id is its first 32 hex chars), made once per text and then looked up. The item
 * measures, the evidence store and the history planner's receipts all ask the same ledger. Bounded:
 * texts are held as keys of an LRU map limited in characters.
 */
import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { intOption } from '../options.js';
import { idMatchesSha, sha256Hex, shortIdForSha } from '../vault/identity.js';
import type { KnownContent } from '../vault/ports.js';

/** Options of {@link createDigests}; every field is optional. */
export interface DigestsOptions {
  /**
   * The hash: hex SHA-256 of the UTF-8 bytes. Tests inject a counting wrapper of {@link sha256Hex};
   * anything else breaks the vault's ids.
   *
   * @defaultValue {@link sha256Hex}
   */
  readonly hash?: (text: string) => string;
  /**
   * Characters of texts kept as lookup keys (least recently used dropped first): the current
   * requests' new outputs; a text dropped is hashed again when it comes back. The strings are
   * the requests' own, so what this holds is what it keeps alive after the requests are gone.
   *
   * @defaultValue 8 Mi
   */
  readonly maxChars?: number;
  /**
   * Texts shorter than this are hashed every time and not kept (a short hash costs less than holding its key).
   *
   * @defaultValue 256
   */
  readonly keepFrom?: number;
}

/** Digests made once per text (see the module comment). */
export interface Digests {
  /** Hex SHA-256 of `text`'s UTF-8 bytes. */
  of(text: string): string;
  /**
   * The kept text an artifact id names (its digest's 32-hex prefix, or the whole digest), with
   * that digest: what lets a read-back compare the row with the text instead of hashing it.
   */
  known(artifactId: string): KnownContent | undefined;
  /** Texts hashed since this ledger was made (for tests and benches). */
  readonly hashed: number;
  /** Forget every kept digest. */
  clear(): void;
}

/**
 * A digest ledger: one per item-measures memo (the runtime's is shared by all request stages).
 *
 * @example
 * const digests = createDigests();
 * digests.of(output); // hashed
 * digests.of(output); // looked up
 * @throws ConfigError when `maxChars` or `keepFrom` is not an integer ≥ 0.
 */
export function createDigests(options: DigestsOptions = {}): Digests {
  const hash = options.hash ?? sha256Hex;
  const maxChars = intOption('createDigests', 'maxChars', options.maxChars, 8 * 1024 * 1024, 1);
  const keepFrom = intOption('createDigests', 'keepFrom', options.keepFrom, 256, 0);
  /** Short artifact id → kept text, for {@link Digests.known}. */
  const byId = new Map<string, string>();
  const make = (): LRUCache<string, string> =>
    new LRUCache<string, string>({
      maxSize: maxChars,
      sizeCalculation: (_, text) => Math.max(1, text.length),
      dispose: (digest, text) => {
        const id = shortIdForSha(digest);
        if (byId.get(id) === text) byId.delete(id);
      },
    });
  let kept = make();
  let hashed = 0;
  return {
    of(text) {
      if (text.length < keepFrom || text.length > maxChars) {
        hashed++;
        return hash(text);
      }
      let digest = kept.get(text);
      if (digest === undefined) {
        hashed++;
        kept.set(text, (digest = hash(text)));
        byId.set(shortIdForSha(digest), text);
      }
      return digest;
    },
    known(artifactId) {
      const text = byId.get(artifactId.slice(0, 34));
      const sha256 = text === undefined ? undefined : kept.peek(text);
      return sha256 === undefined || !idMatchesSha(artifactId, sha256) ? undefined : { content: text!, sha256 };
    },
    get hashed() {
      return hashed;
    },
    clear() {
      kept.clear();
      kept = make();
      byId.clear();
    },
  };
}

/** Strings of at least this many code units are named by their ledger digest in an item's identity. */
export const NAMED_FROM = 256;

/**
 * The identity of a JSON value as its host sent it (key order kept): SHA-256 (base64) of its JSON
 * with each string of at least {@link NAMED_FROM} code units written as its ledger digest, so a
 * tool output inside the value is hashed once, by the ledger, and the value's own hash covers only
 * the short rest. `chars`: the length of its JSON, long strings counted unescaped.
 *
 * @example
 * const { digest } = namedIdentity({ role: 'tool', content: output }, digests); // output hashed by the ledger
 */
export function namedIdentity(value: unknown, digests: Digests): { readonly digest: string; readonly chars: number } {
  let named = 0;
  const json =
    JSON.stringify(value, (_key, v: unknown) => {
      if (typeof v !== 'string' || v.length < NAMED_FROM) return v;
      named += v.length - 64;
      return `\u0000${digests.of(v)}`;
    }) ?? 'undefined';
  return { digest: createHash('sha256').update(json).digest('base64'), chars: json.length + named };
}
