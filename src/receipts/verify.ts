/**
 * Exact-recovery check for every receipt that reached a final request: page the artifact out of
 * the vault until `nextOffset` is null, and compare the reassembled content's SHA-256 with the
 * stored digest and with the artifact id, and its length with the stored length.
 */
import { codePoints, stringsOf } from '../measure/canonical-json.js';
import { referencedArtifacts } from './index.js';
import { sha256Hex } from '../vault/index.js';
import type { ArtifactStore } from '../vault/ports.js';

/** Verifies artifact ids against one vault; each id is recovered once and its verdict remembered. */
export class ReceiptVerifier {
  readonly #vault: ArtifactStore;
  readonly #verdicts = new Map<string, boolean>();
  readonly #refs = new WeakMap<object, readonly string[]>();

  constructor(vault: ArtifactStore) {
    this.#vault = vault;
  }

  /** Artifact ids named by Token Terminator markers anywhere in these messages, once each. */
  referenced(messages: readonly unknown[]): string[] {
    const ids = new Set<string>();
    for (const m of messages) for (const id of this.#idsOf(m)) ids.add(id);
    return [...ids];
  }

  /** How many of `ids` recover exactly. */
  async verify(ids: readonly string[]): Promise<number> {
    let ok = 0;
    for (const id of ids) if (await this.recovers(id)) ok++;
    return ok;
  }

  /** True when the artifact pages out to content whose digest, id and length all match. */
  async recovers(id: string): Promise<boolean> {
    const known = this.#verdicts.get(id);
    if (known !== undefined) return known;
    const verdict = await recoverExact(this.#vault, id);
    this.#verdicts.set(id, verdict);
    return verdict;
  }

  #idsOf(message: unknown): readonly string[] {
    if (typeof message !== 'object' || message === null)
      return typeof message === 'string' ? referencedArtifacts(message) : [];
    const known = this.#refs.get(message);
    if (known !== undefined) return known;
    const list = [...new Set(stringsOf(message).flatMap(referencedArtifacts))];
    this.#refs.set(message, list);
    return list;
  }
}

/**
 * Page an artifact out completely and check it against its digest, id and length.
 *
 * @example
 * import { createVault } from 'token-terminator';
 * await using vault = await createVault({ path: ':memory:' });
 * const ok = await recoverExact(vault, artifactId); // false when any page is missing or altered
 */
export async function recoverExact(vault: ArtifactStore, id: string): Promise<boolean> {
  try {
    const parts: string[] = [];
    let offset = 0;
    for (;;) {
      const page = await vault.page(id, offset);
      parts.push(page.content);
      if (page.nextOffset === null) {
        const content = parts.join('');
        const sha = sha256Hex(content);
        return sha === page.sha256 && sha.startsWith(id.slice(2)) && codePoints(content) === page.totalChars;
      }
      if (page.nextOffset <= offset) return false;
      offset = page.nextOffset;
    }
  } catch {
    return false;
  }
}
