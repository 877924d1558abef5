/**
 * Who a request belongs to, without client changes.
 *
 * - Tenant: a digest of the API key the request carries (`Authorization: Bearer …`, `x-api-key`,
 *   `api-key`), never the key itself; `''` when there is none. It is the StepContext tenant.
 * - Session: the `x-token-terminator-session` header when present (scoped by the tenant, so two
 *   keys never share a session); otherwise a digest of the tenant, the API and the instruction
 *   prefix: every conversation item before the first assistant item
 *   (system/developer prompts and the opening user message) plus the top-level instructions.
 *   A conversation keeps that prefix for its whole life, so its requests meet in one session,
 *   while two conversations with different opening messages stay apart. Two conversations that
 *   open with the very same instructions and message under one key share a session: send the
 *   header to tell them apart. Prompt-cache markers (`cache_control`) are not part of the identity:
 *   clients move them from request to request (Claude Code takes the one off an opening message
 *   after the first request, which then turns from a one-part list into a string) while the
 *   conversation stays the same.
 */
import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { canonicalJson } from '../../src/measure/index.js';
import { conversationItems, type RecoveryWireFormat } from '../../src/recovery/formats.js';

/** Request header that names the session explicitly; the proxy scopes it by tenant and never sends it upstream. */
export const SESSION_HEADER = 'x-token-terminator-session';

/**
 * A client's own budgeting window W in tokens (docs/window.md): the requests it sends are fitted
 * under it, e.g. below its host's compaction threshold (Claude Code compacts at about 156k of a
 * 200k window). Over the model table and TOKEN_TERMINATOR_MODEL_LIMITS, under INCONTEXT_COMPRESSION_WINDOW_TOKENS.
 */
export const WINDOW_HEADER = 'x-token-terminator-window';

/**
 * The window a client asks for in {@link WINDOW_HEADER}: a positive integer of at most 10 digits,
 * else undefined (the header is then ignored).
 *
 * @example
 * clientWindow({ 'x-token-terminator-window': '150000' }); // 150000
 */
export function clientWindow(headers: IncomingHttpHeaders): number | undefined {
  const raw = header(headers, WINDOW_HEADER)?.trim();
  if (raw === undefined || !/^[1-9]\d{0,9}$/.test(raw)) return undefined;
  return Number(raw);
}

const sha = (text: string): string => createHash('sha256').update(text).digest('hex');

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** The API key a request carries, if any (read only to digest it). */
function apiKey(headers: IncomingHttpHeaders): string | undefined {
  const auth = header(headers, 'authorization');
  if (auth !== undefined) {
    const m = /^\s*Bearer\s+(.+?)\s*$/i.exec(auth);
    return m?.[1] ?? auth.trim();
  }
  return header(headers, 'x-api-key') ?? header(headers, 'api-key');
}

/**
 * `k_` + 24 hex chars of the key's SHA-256, or `''` without a key.
 *
 * @example
 * tenantOf({ authorization: 'Bearer sk-test' }); // 'k_' + 24 hex chars
 */
export function tenantOf(headers: IncomingHttpHeaders): string {
  const key = apiKey(headers);
  return key === undefined || key === '' ? '' : `k_${sha(`token-terminator tenant\u0000${key}`).slice(0, 24)}`;
}

/** The items before the first assistant item (the instruction prefix), plus top-level instructions. */
function instructionPrefix(request: Readonly<Record<string, unknown>>, format: RecoveryWireFormat): unknown[] {
  const items = conversationItems(request, format);
  const prefix: unknown[] = [];
  for (const item of items) {
    const it = item as { role?: unknown; type?: unknown };
    if (it?.role === 'assistant' || it?.type === 'function_call' || it?.type === 'reasoning') break;
    prefix.push(item);
  }
  return withoutCacheMarkers([request['system'] ?? null, request['instructions'] ?? null, prefix]) as unknown[];
}

/**
 * A copy without `cache_control` keys, at any depth, and with a content list of one plain text part
 * read as that text (the caller's objects are not touched): Claude Code sends an opening message as
 * `[{ type: 'text', text, cache_control }]` once and as the string `text` in every later request.
 */
function withoutCacheMarkers(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutCacheMarkers);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    if (key === 'cache_control') continue;
    out[key] = key === 'content' ? plainText(withoutCacheMarkers(v)) : withoutCacheMarkers(v);
  }
  return out;
}

function plainText(content: unknown): unknown {
  if (!Array.isArray(content) || content.length !== 1) return content;
  const part = content[0] as Record<string, unknown> | null;
  if (part === null || typeof part !== 'object' || part['type'] !== 'text' || typeof part['text'] !== 'string')
    return content;
  return Object.keys(part).length === 2 ? part['text'] : content;
}

/**
 * The session id for a request (see the module comment).
 *
 * @example
 * sessionOf(req.headers, body, 'chat', tenantOf(req.headers)); // 'p_3f…'
 */
export function sessionOf(
  headers: IncomingHttpHeaders,
  request: Readonly<Record<string, unknown>>,
  format: RecoveryWireFormat,
  tenant: string,
): string {
  const given = header(headers, SESSION_HEADER)?.trim();
  if (given !== undefined && given !== '' && given.length <= 200 && /^[\x20-\x7e]+$/.test(given)) {
    return tenant === '' ? `h:${given}` : `h:${given}@${tenant.slice(2, 14)}`;
  }
  const digest = sha(
    `${tenant}\u0000${format}\u0000${canonicalJson(instructionPrefix(request, format), { compact: true })}`,
  );
  return `p_${digest.slice(0, 32)}`;
}
