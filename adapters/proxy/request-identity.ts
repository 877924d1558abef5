/**
 * Who a request belongs to, without client changes (docs/gateway.md tells the rule to users).
 * Tenant: the whole SHA-256 of every credential the request carries, never a key itself; `''` when
 * it carries none; a blank header is no credential. Session: the `x-token-terminator-session`
 * header, else a digest of the tenant, the API and the instruction prefix (every item before the
 * first assistant item, plus the top-level instructions), which a conversation keeps for its whole
 * life. Prompt-cache markers (`cache_control`) are not part of it: clients move them between
 * requests (Claude Code takes the one off an opening message after the first request, which then
 * turns from a one-part list into a string) while the conversation stays the same.
 */
import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { canonicalJson } from '../../src/measure/index.js';
import { conversationItems, withoutCacheMarkers, type RecoveryWireFormat } from '../../src/recovery/formats.js';

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

/** Headers an upstream may authenticate a request by. */
const CREDENTIAL_HEADERS = ['authorization', 'x-api-key', 'api-key'] as const;

/**
 * The credentials a request carries, by header, blank ones left out (read only to digest them):
 * every one of them, since which one an upstream honours is the upstream's choice.
 */
function credentials(headers: IncomingHttpHeaders): [string, string][] {
  const found: [string, string][] = [];
  for (const name of CREDENTIAL_HEADERS) {
    const raw = header(headers, name)?.trim();
    const value = name === 'authorization' ? raw?.replace(/^Bearer(?:\s+|$)/i, '').trim() : raw;
    if (value !== undefined && value !== '') found.push([name, value]);
  }
  return found;
}

/**
 * `k_` + the 64 hex chars of the SHA-256 of the request's credentials, or `''` without any.
 *
 * @example
 * tenantOf({ authorization: 'Bearer sk-test' }); // 'k_' + 64 hex chars
 */
export function tenantOf(headers: IncomingHttpHeaders): string {
  const found = credentials(headers);
  // JSON of [name, value] pairs: the structure is part of the digest, so no value can pose as another split.
  return found.length === 0 ? '' : `k_${sha(`token-terminator tenant\u0000${JSON.stringify(found)}`)}`;
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
  return withoutCacheMarkers([request['system'] ?? null, request['instructions'] ?? null, prefix], {
    plainText: true,
  }) as unknown[];
}

/**
 * The session id for a request (see the module comment). A given name is taken as it is: the
 * session's state is keyed by the tenant beside it (`sessionStateKey`), so a name, whatever it
 * holds, never reaches another tenant's session.
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
    return `h:${given}`;
  }
  const digest = sha(
    `${tenant}\u0000${format}\u0000${canonicalJson(instructionPrefix(request, format), { compact: true })}`,
  );
  return `p_${digest.slice(0, 32)}`;
}
