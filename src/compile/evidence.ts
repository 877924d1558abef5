/**
 * Turning tool evidence into receipts through the vault, memoized per session: the same content
 * is written (and read back) once, and every later request reuses the verified artifact id.
 */
import { createHash } from 'node:crypto';
import { canonicalJson, codePoints } from '../measure/index.js';
import { createReceipt, isReceipt, renderReceipt } from '../receipts/index.js';
import type { ArtifactStore, LeaseStore } from '../vault/ports.js';

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
    if (typeof part !== 'object' || part === null || !TEXT_TYPES.has((part as { type?: string }).type ?? '')) return undefined;
  }
  return canonicalJson(value);
}

/** Length in code points of a tool output's content as vaulted (0 when it is not receiptable). */
export function evidenceChars(value: unknown): number {
  if (typeof value === 'string') return codePoints(value);
  const text = evidenceText(value);
  return text === undefined ? 0 : codePoints(text);
}

/** The whole artifact, page by page (exact). Throws what the vault throws. */
export async function readWhole(vault: ArtifactStore, artifactId: string): Promise<string> {
  const parts: string[] = [];
  for (let offset: number | null = 0; offset !== null; ) {
    const page = await vault.page(artifactId, offset);
    parts.push(page.content);
    if (page.nextOffset !== null && page.nextOffset <= offset) throw new RangeError('vault page did not advance');
    offset = page.nextOffset;
  }
  return parts.join('');
}

export interface EvidenceStore {
  /** Vault `text` and return its receipt (memoized by content). Throws what the vault throws. */
  receipt(text: string, meta: { readonly toolName: string; readonly args?: unknown; readonly sessionId: string; readonly callId?: string }): Promise<Receipted>;
  /** Vault arbitrary text (collapsed steps) and return its artifact id and size. */
  store(text: string, sessionId: string, toolName: string): Promise<{ readonly artifactId: string; readonly chars: number }>;
  /** Pin artifacts named by delivered receipts (each id once per session). */
  pin(ids: readonly string[]): Promise<void>;
}

/** Chars of evidence texts a store keeps as lookup keys (per session). */
const MAX_TEXT_CHARS = 32 * 1024 * 1024;

/** One store per session (per subscription). `maxEntries` bounds the content → artifact memo (default 10,000). */
export function createEvidenceStore(vault: ArtifactStore & LeaseStore, maxEntries = 10_000): EvidenceStore {
  type Entry = { artifactId: string; sha256: string; chars: number };
  const known = new Map<string, Entry>();
  // The texts themselves, for the requests that hand the same string over again (a rewrite's
  // evidence is vaulted once but named by every later request): a lookup instead of a SHA-256.
  // They are the strings the session's history and renderings hold anyway; bounded in count and chars.
  const byText = new Map<string, Entry>();
  let textChars = 0;
  const remember = (text: string, entry: Entry): void => {
    if (byText.has(text)) return;
    byText.set(text, entry);
    textChars += text.length;
    while (byText.size > maxEntries || textChars > MAX_TEXT_CHARS) {
      const oldest = byText.keys().next().value as string;
      byText.delete(oldest);
      textChars -= oldest.length;
    }
  };
  const pinned = new Set<string>();
  const rendered = new WeakMap<Entry, Map<string, Receipted>>();
  const put = async (text: string, meta: { toolName: string; args?: unknown; sessionId: string; callId?: string }) => {
    const same = byText.get(text);
    if (same !== undefined) return same;
    const key = createHash('sha256').update(text, 'utf8').digest('base64');
    const hit = known.get(key);
    if (hit !== undefined) {
      remember(text, hit);
      return hit;
    }
    const result = await vault.put({ content: text, toolName: meta.toolName, args: meta.args ?? {}, sessionId: meta.sessionId, ...(meta.callId === undefined ? {} : { callId: meta.callId }) });
    const entry = { artifactId: result.artifactId, sha256: result.sha256, chars: result.chars };
    known.set(key, entry);
    if (known.size > maxEntries) known.delete(known.keys().next().value as string);
    remember(text, entry);
    return entry;
  };
  return {
    async receipt(text, meta) {
      const e = await put(text, meta);
      // The rendered receipt per tool name, kept with the entry (a rewrite names it in every later request).
      const shown = (rendered.get(e) ?? rendered.set(e, new Map()).get(e)!) as Map<string, Receipted>;
      let r = shown.get(meta.toolName);
      if (r === undefined) shown.set(meta.toolName, (r = Object.freeze({ text: renderReceipt(createReceipt(e.artifactId, meta.toolName, e.chars, e.sha256)), artifactId: e.artifactId, verified: true as const })));
      return r;
    },
    async store(text, sessionId, toolName) {
      const e = await put(text, { toolName, sessionId });
      return { artifactId: e.artifactId, chars: e.chars };
    },
    async pin(ids) {
      const fresh = [...new Set(ids)].filter((id) => !pinned.has(id));
      if (fresh.length === 0) return;
      await vault.pin(fresh);
      for (const id of fresh) pinned.add(id);
    },
  };
}
