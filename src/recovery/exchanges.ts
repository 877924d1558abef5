/**
 * Recovered exchanges, kept per session and shown again at the same place in later requests.
 *
 * The caller never sees a recovery round, so its next request lacks it. An exchange is anchored
 * after the conversation item the round followed (its position and a digest of that item, as the
 * caller sent it); a later request whose item at that position has the same digest gets the
 * exchange inserted right after it, byte for byte as before. The model keeps what it recovered
 * and the prompt prefix stays what the provider cached. When the upstream keeps the conversation
 * (Responses `previous_response_id`), only the results of a round the caller's turn ended on are
 * kept, and sent along with the next request that chains to that response.
 *
 * The whole state of a session is one JSON value in the store (the vault's renderings), so a
 * restarted process or a second replica on the same store shows the same exchanges.
 */
import { createHash } from 'node:crypto';
import { canonicalJson } from '../measure/index.js';
import type { ProviderRequest } from '../step.js';
import { conversationItems, listKey, type RecoveryWireFormat } from './formats.js';

/** Where the state lives: the vault's `getRendering` / `setRendering` fit. */
export interface ExchangeStore {
  getRendering(sessionId: string, key: string): Promise<string | undefined>;
  setRendering(sessionId: string, key: string, value: string): Promise<void>;
}

export interface AnchoredExchange {
  /** Number of caller items before the exchange. */
  readonly anchor: number;
  /** Digest of the caller's item at `anchor - 1`. */
  readonly digest: string;
  readonly items: readonly unknown[];
}

export interface PendingResults {
  /** The upstream response the results answer. */
  readonly responseId: string;
  readonly items: readonly unknown[];
}

/** One session's recovery state. */
export interface RecoveryState {
  /** The recovery tool has been offered in this session (it stays, at the same place). */
  readonly tool: boolean;
  readonly exchanges: readonly AnchoredExchange[];
  readonly pending: readonly PendingResults[];
}

export const EMPTY_RECOVERY_STATE: RecoveryState = Object.freeze({
  tool: false,
  exchanges: Object.freeze([]),
  pending: Object.freeze([]),
});

const KEY = 'recovery.state.v1';
/** Most exchanges kept per session (the oldest anchors go first). */
const MAX_EXCHANGES = 64;
const MAX_PENDING = 8;

/** Digest of one conversation item (canonical JSON, so key order does not matter). */
export function itemDigest(item: unknown): string {
  return createHash('sha256')
    .update(canonicalJson(item, { compact: true }))
    .digest('hex')
    .slice(0, 32);
}

/** Read a session's state; an unreadable or absent value is the empty state. */
export async function loadRecoveryState(store: ExchangeStore, sessionId: string): Promise<RecoveryState> {
  const raw = await store.getRendering(sessionId, KEY);
  if (raw === undefined) return EMPTY_RECOVERY_STATE;
  try {
    const parsed = JSON.parse(raw) as Partial<RecoveryState>;
    return {
      tool: parsed.tool === true,
      exchanges: Array.isArray(parsed.exchanges) ? parsed.exchanges : [],
      pending: Array.isArray(parsed.pending) ? parsed.pending : [],
    };
  } catch {
    return EMPTY_RECOVERY_STATE;
  }
}

export async function saveRecoveryState(store: ExchangeStore, sessionId: string, state: RecoveryState): Promise<void> {
  const bounded: RecoveryState = {
    tool: state.tool,
    exchanges: state.exchanges.slice(-MAX_EXCHANGES),
    pending: state.pending.slice(-MAX_PENDING),
  };
  await store.setRendering(sessionId, KEY, JSON.stringify(bounded));
}

/** The state after one answered (or stopped) recovery loop on `request`. */
export function recordExchange(
  state: RecoveryState,
  request: ProviderRequest,
  format: RecoveryWireFormat,
  exchange: readonly unknown[],
  serverSide: { readonly responseId?: string; readonly pendingItems?: readonly unknown[] } | undefined,
): RecoveryState {
  if (serverSide !== undefined) {
    const items = serverSide.pendingItems ?? [];
    if (serverSide.responseId === undefined || items.length === 0) return state;
    return { ...state, pending: [...state.pending, { responseId: serverSide.responseId, items }] };
  }
  if (exchange.length === 0) return state;
  const callerItems = conversationItems(request, format);
  if (callerItems.length === 0) return state;
  const anchor = callerItems.length;
  const digest = itemDigest(callerItems[anchor - 1]);
  // A retried request replaces what its earlier attempt recorded at the same place.
  const others = state.exchanges.filter((e) => !(e.anchor === anchor && e.digest === digest));
  return { ...state, exchanges: [...others, { anchor, digest, items: exchange }].sort((a, b) => a.anchor - b.anchor) };
}

/**
 * The caller's request with every matching exchange inserted at its place (the request itself
 * when none matches), plus pending results for a request that chains to their response.
 */
export function applyExchanges(
  request: ProviderRequest,
  format: RecoveryWireFormat,
  state: RecoveryState,
): ProviderRequest {
  if (format === 'responses' && typeof request['previous_response_id'] === 'string') {
    const pending = state.pending.filter((p) => p.responseId === request['previous_response_id']);
    if (pending.length === 0) return request;
    const input = request['input'];
    const tail = Array.isArray(input) ? input : typeof input === 'string' ? [{ role: 'user', content: input }] : [];
    return { ...request, input: [...pending.flatMap((p) => p.items), ...tail] };
  }
  if (state.exchanges.length === 0) return request;
  const items = conversationItems(request, format);
  const byAnchor = new Map<number, AnchoredExchange[]>();
  for (const e of state.exchanges) {
    if (e.anchor < 1 || e.anchor > items.length) continue;
    const list = byAnchor.get(e.anchor) ?? [];
    list.push(e);
    byAnchor.set(e.anchor, list);
  }
  if (byAnchor.size === 0) return request;
  const out: unknown[] = [];
  let inserted = false;
  items.forEach((item, i) => {
    out.push(item);
    const here = byAnchor.get(i + 1);
    if (here === undefined) return;
    const digest = itemDigest(item);
    for (const e of here) {
      if (e.digest !== digest) continue;
      out.push(...e.items);
      inserted = true;
    }
  });
  return inserted ? { ...request, [listKey(format)]: out } : request;
}
