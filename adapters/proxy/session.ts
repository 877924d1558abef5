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
 *   header to tell them apart.
 */
import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { canonicalJson } from '../../src/measure/index.js';
import { conversationItems, type RecoveryWireFormat } from '../../src/recovery/formats.js';

/** Request header that names the session explicitly; the proxy scopes it by tenant and never sends it upstream. */
export const SESSION_HEADER = 'x-token-terminator-session';

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
  return [request['system'] ?? null, request['instructions'] ?? null, prefix];
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
