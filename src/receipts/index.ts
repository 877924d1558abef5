/**
 * One-line receipts: what the model sees in place of vaulted evidence.
 *
 * Wire format (compatible with the reference):
 * `[Token Terminator artifact a_… | tool=<label> | chars=<n> | sha256=<16 hex>… | recover with token_terminator action=artifact_get]`
 * A receipt names only the artifact id, a bounded tool label, a char count and a digest prefix:
 * never arguments or content. The label is neutralized so text inside a tool name cannot add a
 * newline, close the bracket or forge a second `artifact` field.
 */

export const RECOVERY_HINT = 'recover with token_terminator action=artifact_get';
const MAX_LABEL = 80;
const ELLIPSIS = '\u2026';

export interface Receipt {
  readonly artifactId: string;
  /** Sanitized tool label (≤ 80 chars, `[\p{L}\p{N}._:/-]` only). */
  readonly tool: string;
  /** Length of the replaced content in code points. */
  readonly chars: number;
  /** First 16 hex chars of the content's SHA-256, when known. */
  readonly sha256Prefix?: string;
}

/** Neutralize a tool name for a receipt: whitespace runs → `_`, anything outside `[\p{L}\p{N}._:/-]` → `_`. */
export function toolLabel(name: string): string {
  const label = Array.from(name.replace(/\s+/gu, '_'))
    .map((ch) => (/^[\p{L}\p{N}._:/-]$/u.test(ch) ? ch : '_'))
    .slice(0, MAX_LABEL)
    .join('');
  return label === '' ? 'tool' : label;
}

/** Build a receipt with a sanitized label. */
export function createReceipt(artifactId: string, toolName: string, chars: number, sha256?: string): Receipt {
  const base = { artifactId, tool: toolLabel(toolName), chars };
  return Object.freeze(sha256 === undefined ? base : { ...base, sha256Prefix: sha256.slice(0, 16) });
}

/** Render a receipt as one line (never contains a newline). */
export function renderReceipt(receipt: Receipt): string {
  const digest = receipt.sha256Prefix === undefined ? '' : ` | sha256=${receipt.sha256Prefix}${ELLIPSIS}`;
  return `[Token Terminator artifact ${receipt.artifactId} | tool=${toolLabel(receipt.tool)} | chars=${receipt.chars}${digest} | ${RECOVERY_HINT}]`;
}

const RECEIPT_RE =
  /^\[Token Terminator artifact (a_[0-9a-f]{32}(?:[0-9a-f]{32})?) \| tool=([\p{L}\p{N}._:/-]{1,80}) \| chars=(\d+)(?: \| sha256=([0-9a-f]{16})\u2026)? \| recover with token_terminator action=artifact_get\]$/u;

/** Parse a rendered receipt; undefined for anything else. */
export function parseReceipt(text: string): Receipt | undefined {
  const m = RECEIPT_RE.exec(text);
  if (m === null) return undefined;
  const [, artifactId, tool, chars, sha] = m;
  return createReceipt(artifactId!, tool!, Number(chars), sha);
}

/** True when a text is exactly one receipt (used for idempotence: never receipt a receipt). */
export function isReceipt(text: string): boolean {
  return text.startsWith('[Token Terminator artifact ') && RECEIPT_RE.test(text);
}

const ARTIFACT_ID_RE = /(?<![0-9A-Za-z_])a_[0-9a-f]{32}(?:[0-9a-f]{32})?(?![0-9A-Za-z])/g;
const MARKER = 'Token Terminator';

/**
 * Every artifact id named by a Token Terminator marker (receipt, native note, temporal header,
 * collapse note) inside a text. Used to verify that every receipt that reached an output recovers.
 */
export function referencedArtifacts(text: string): string[] {
  if (!text.includes(MARKER)) return [];
  const ids = new Set<string>();
  for (const line of text.split('\n')) {
    if (!line.includes(MARKER)) continue;
    for (const m of line.matchAll(ARTIFACT_ID_RE)) ids.add(m[0]);
  }
  return [...ids];
}

/** The note appended after a native compact rendering (reference wire format). */
export function renderNativeNote(rawChars: number, compactChars: number, artifactId: string): string {
  return `[Token Terminator: ${pythonPercent(rawChars, compactChars)}% fewer characters; full artifact=${artifactId}; ${RECOVERY_HINT}]`;
}

/** Python's `round((raw - compact) / raw * 100, 1)` printed as a Python float (`96.0`, `100.0`). */
export function pythonPercent(raw: number, compact: number): string {
  if (raw <= 0) return '0.0';
  const value = Math.round(((raw - compact) / raw) * 1000) / 10;
  return Number.isInteger(value) ? `${value}.0` : String(value);
}
