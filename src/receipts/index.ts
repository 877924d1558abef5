/**
 * One-line receipts: what the model sees in place of vaulted evidence.
 *
 * Wire format (compatible with the reference):
 * `[Token Terminator artifact a_… | tool=<label> | chars=<n> | sha256=<16 hex>… | recover with token_terminator action=artifact_get]`
 * A receipt names only the artifact id, a bounded tool label, a char count and a digest prefix:
 * never arguments or content. The label is neutralized so text inside a tool name cannot add a
 * newline, close the bracket or forge a second `artifact` field.
 */

/** Name of the recovery tool the model calls. */
export const RECOVERY_TOOL_NAME = 'token_terminator';
export const RECOVERY_HINT = `recover with ${RECOVERY_TOOL_NAME} action=artifact_get`;
const MAX_LABEL = 80;
const ELLIPSIS = '\u2026';

/** What a receipt in the conversation records about a vaulted output: artifact id, tool label and size. */
export interface Receipt {
  readonly artifactId: string;
  /** Sanitized tool label (≤ 80 chars, `[\p{L}\p{N}._:/-]` only). */
  readonly tool: string;
  /** Length of the replaced content in code points. */
  readonly chars: number;
  /** First 16 hex chars of the content's SHA-256, when known. */
  readonly sha256Prefix?: string;
}

/**
 * Python's `str.split()` whitespace (what the reference splits tool names on): JS `\s` differs by
 * U+FEFF (not whitespace in Python) and U+001C–U+001F, U+0085 (whitespace in Python).
 */
const PY_SPACE = '\\t\\n\\v\\f\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
const EDGE_SPACE = new RegExp(`^[${PY_SPACE}]+|[${PY_SPACE}]+$`, 'gu');
const SPACE_RUN = new RegExp(`[${PY_SPACE}]+`, 'gu');

/**
 * Neutralize a tool name for a receipt, as the reference does: split on whitespace and join with
 * `_` (so leading and trailing whitespace vanish), map anything outside `[\p{L}\p{N}._:/-]` to `_`,
 * cut to 80 code points; empty → `tool`. `" terminal"` → `terminal`, `"   "` → `tool`.
 *
 * @example
 * toolLabel(' read file '); // 'read_file'
 * toolLabel('   '); // 'tool'
 */
export function toolLabel(name: string): string {
  const label = Array.from(name.replace(EDGE_SPACE, '').replace(SPACE_RUN, '_'))
    .map((ch) => (/^[\p{L}\p{N}._:/-]$/u.test(ch) ? ch : '_'))
    .slice(0, MAX_LABEL)
    .join('');
  return label === '' ? 'tool' : label;
}

/**
 * Build a receipt with a sanitized label.
 *
 * @example
 * const text = renderReceipt(createReceipt(put.artifactId, 'terminal', codePoints(output)));
 */
export function createReceipt(artifactId: string, toolName: string, chars: number, sha256?: string): Receipt {
  const base = { artifactId, tool: toolLabel(toolName), chars };
  return Object.freeze(sha256 === undefined ? base : { ...base, sha256Prefix: sha256.slice(0, 16) });
}

/**
 * Render a receipt as one line (never contains a newline).
 *
 * @example
 * const text = renderReceipt(createReceipt(artifactId, 'terminal', 12_000));
 */
export function renderReceipt(receipt: Receipt): string {
  const digest = receipt.sha256Prefix === undefined ? '' : ` | sha256=${receipt.sha256Prefix}${ELLIPSIS}`;
  return `[Token Terminator artifact ${receipt.artifactId} | tool=${toolLabel(receipt.tool)} | chars=${receipt.chars}${digest} | ${RECOVERY_HINT}]`;
}

// `tool=` may be empty: the reference's compactor receipts carry no empty-name fallback.
const RECEIPT_RE =
  /^\[Token Terminator artifact (a_[0-9a-f]{32}(?:[0-9a-f]{32})?) \| tool=([\p{L}\p{N}._:/-]{0,80}) \| chars=(\d+)(?: \| sha256=([0-9a-f]{16})\u2026)? \| recover with token_terminator action=artifact_get\]$/u;

/**
 * Parse a rendered receipt; undefined for anything else.
 *
 * @example
 * const receipt = parseReceipt(content); // undefined when `content` is not a receipt
 */
export function parseReceipt(text: string): Receipt | undefined {
  const m = RECEIPT_RE.exec(text);
  if (m === null) return undefined;
  const [, artifactId, tool, chars, sha] = m;
  const base = { artifactId: artifactId!, tool: tool!, chars: Number(chars) };
  return Object.freeze(sha === undefined ? base : { ...base, sha256Prefix: sha });
}

/**
 * True when a text is exactly one receipt (used for idempotence: never receipt a receipt).
 *
 * @example
 * if (isReceipt(message.content)) return step; // already vaulted
 */
export function isReceipt(text: string): boolean {
  return text.startsWith('[Token Terminator artifact ') && RECEIPT_RE.test(text);
}

const ARTIFACT_ID_RE = /(?<![0-9A-Za-z_])a_[0-9a-f]{32}(?:[0-9a-f]{32})?(?![0-9A-Za-z])/g;
const MARKER = 'Token Terminator';

/**
 * Every artifact id named by a Token Terminator marker (receipt, native note, temporal header,
 * collapse note) inside a text. Used to verify that every receipt that reached an output recovers.
 *
 * @example
 * const ids = referencedArtifacts(messageText); // ['a_…', …]
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

/**
 * The note appended after a native compact rendering (reference wire format).
 *
 * @example
 * const note = renderNativeNote(20_000, 800, artifactId); // '[Token Terminator: 96.0% fewer characters; …]'
 */
export function renderNativeNote(rawChars: number, compactChars: number, artifactId: string): string {
  return `[Token Terminator: ${pythonPercent(rawChars, compactChars)}% fewer characters; full artifact=${artifactId}; ${RECOVERY_HINT}]`;
}

/**
 * Python's `round((raw - compact) / raw * 100, 1)` printed as a Python float (`96.0`, `100.0`).
 * Python rounds the exact binary value half to even (raw 20000, compact 7950: 60.25 → `60.2`);
 * `Math.round` would round half up. `toFixed(100)` gives the double's exact decimal expansion.
 *
 * @example
 * pythonPercent(20_000, 7950); // '60.2' (half to even, as Python rounds)
 * pythonPercent(100, 0); // '100.0'
 */
export function pythonPercent(raw: number, compact: number): string {
  if (raw <= 0) return '0.0';
  const value = ((raw - compact) / raw) * 100;
  const negative = value < 0;
  const [whole = '0', fraction = ''] = Math.abs(value).toFixed(100).split('.');
  const first = fraction.charAt(0) || '0';
  const rest = fraction.slice(1).replace(/0+$/, '');
  const up =
    rest !== '' && (rest.charAt(0) > '5' || (rest.charAt(0) === '5' && (rest.length > 1 || Number(first) % 2 === 1)));
  const tenths = BigInt(`${whole}${first}`) + (up ? 1n : 0n);
  const text = `${tenths / 10n}.${tenths % 10n}`;
  return negative && tenths !== 0n ? `-${text}` : text;
}
