/**
 * Recovered exchanges, kept per session and shown again at the same place in later requests.
 *
 * The caller never sees a recovery round, so its next request lacks it. An exchange is anchored
 * after the item the round followed (position and digest); a later request with the same item
 * there gets the exchange inserted after it, byte for byte, so the model keeps what it recovered
 * and the cached prefix holds. When the upstream keeps the conversation (`previous_response_id`),
 * the round's results go with the next request that chains to its response.
 *
 * A session's state is one JSON value in the vault's renderings, shared by restarts and replicas.
 */
import { createHash } from 'node:crypto';
import { canonicalJson } from '../measure/index.js';
import type { ProviderRequest } from '../step.js';
import { evidenceText } from '../compile/evidence.js';
import { readRequest, writeSlots, type SlotChange } from '../model/index.js';
import { isObj, parseArgs } from '../model/read.js';
import { artifactIdFor } from '../vault/identity.js';
import {
  conversationItems,
  listKey,
  serverSideState,
  withoutCacheMarkers,
  type RecoveryWireFormat,
} from './formats.js';

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

/**
 * A streamed Responses answer spliced over recovery rounds reads as one response under the id the
 * client was given first (`from`); the upstream's conversation continues from the last round's
 * (`to`). A request chaining to `from` is sent chaining to `to`.
 */
export interface ResponseAlias {
  readonly from: string;
  readonly to: string;
}

/** One session's recovery state. */
export interface RecoveryState {
  /** The recovery tool has been offered in this session (it stays, at the same place). */
  readonly tool: boolean;
  /** Sorted by anchor (the load sorts what it reads). */
  readonly exchanges: readonly AnchoredExchange[];
  readonly pending: readonly PendingResults[];
  readonly aliases?: readonly ResponseAlias[];
}

export const EMPTY_RECOVERY_STATE: RecoveryState = Object.freeze({
  tool: false,
  exchanges: Object.freeze([]),
  pending: Object.freeze([]),
  aliases: Object.freeze([]),
});

/** The state with `alias` remembered (the newest few are kept). */
export function recordAlias(state: RecoveryState, alias: ResponseAlias): RecoveryState {
  const others = (state.aliases ?? []).filter((a) => a.from !== alias.from);
  return { ...state, aliases: [...others, alias] };
}

const KEY = 'recovery.state.v1';
/** Most exchanges kept per session (the oldest anchors go first). */
const MAX_EXCHANGES = 64;
const MAX_PENDING = 8;
const MAX_ALIASES = 16;

/** Digest of one conversation item (canonical JSON, so key order does not matter). */
export function itemDigest(item: unknown): string {
  return createHash('sha256')
    .update(canonicalJson(item, { compact: true }))
    .digest('hex')
    .slice(0, 32);
}

/**
 * The digest an exchange is anchored by: {@link itemDigest} of the item without its prompt-cache
 * markers. Anthropic clients move `cache_control` to the newest message every request (Claude
 * Code), so the item a round followed comes back without the marker it had.
 */
export function anchorDigest(item: unknown): string {
  return itemDigest(withoutCacheMarkers(item));
}

/** Whether the caller's item is the one an exchange was anchored after (states written before the marker-free digest included). */
const anchoredAfter = (e: AnchoredExchange, item: unknown): boolean =>
  e.digest === anchorDigest(item) || e.digest === itemDigest(item);

/** Read a session's state; an unreadable or absent value is the empty state. */
export async function loadRecoveryState(store: ExchangeStore, sessionId: string): Promise<RecoveryState> {
  const raw = await store.getRendering(sessionId, KEY);
  if (raw === undefined) return EMPTY_RECOVERY_STATE;
  try {
    const parsed = JSON.parse(raw) as Partial<RecoveryState>;
    return {
      tool: parsed.tool === true,
      exchanges: Array.isArray(parsed.exchanges) ? parsed.exchanges.sort((a, b) => a.anchor - b.anchor) : [],
      pending: Array.isArray(parsed.pending) ? parsed.pending : [],
      aliases: Array.isArray(parsed.aliases) ? parsed.aliases : [],
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
    aliases: (state.aliases ?? []).slice(-MAX_ALIASES),
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
  const digest = anchorDigest(callerItems[anchor - 1]);
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
    const given = request['previous_response_id'];
    const chained = state.aliases?.find((a) => a.from === given)?.to ?? given;
    const sent = chained === given ? request : { ...request, previous_response_id: chained };
    const pending = state.pending.filter((p) => p.responseId === chained);
    if (pending.length === 0) return sent;
    return { ...sent, input: [...pending.flatMap((p) => p.items), ...conversationItems(request, format)] };
  }
  if (state.exchanges.length === 0) return request;
  // Exchanges are sorted by anchor: copy the items up to each matching one's place, then its items.
  const items = conversationItems(request, format);
  const out: unknown[] = [];
  let copied = 0;
  for (const e of state.exchanges) {
    if (e.anchor < 1 || e.anchor > items.length || !anchoredAfter(e, items[e.anchor - 1])) continue;
    for (; copied < e.anchor; copied++) out.push(items[copied]);
    out.push(...e.items);
  }
  if (copied === 0) return request;
  for (; copied < items.length; copied++) out.push(items[copied]);
  return { ...request, [listKey(format)]: out };
}

/** The `artifact_id` each recovery call of an exchange named; undefined when a call named none. */
function recoveredIds(items: readonly unknown[]): string[] | undefined {
  const ids: string[] = [];
  const read = (args: unknown): boolean => {
    const id = parseArgs(args)['artifact_id'];
    if (typeof id !== 'string') return false;
    ids.push(id);
    return true;
  };
  for (const item of items) {
    if (!isObj(item)) continue;
    if (Array.isArray(item['tool_calls'])) {
      for (const c of item['tool_calls'])
        if (!read(isObj(c) && isObj(c['function']) ? c['function']['arguments'] : undefined)) return undefined;
    } else if (item['type'] === 'function_call') {
      if (!read(item['arguments'])) return undefined;
    } else if (item['role'] === 'assistant' && Array.isArray(item['content'])) {
      for (const b of item['content']) if (isObj(b) && b['type'] === 'tool_use' && !read(b['input'])) return undefined;
    }
  }
  return ids.length === 0 ? undefined : ids;
}

/** The caller's tool outputs of a request by artifact id: call id and the value as the caller sent it. */
function callerOutputs(
  request: ProviderRequest,
  format: RecoveryWireFormat,
): Map<string, { callId: string; value: unknown }> {
  const out = new Map<string, { callId: string; value: unknown }>();
  for (const slot of readRequest(request, { format }).slots) {
    if (slot.kind !== 'tool_output' || slot.callId === undefined) continue;
    const text = evidenceText(slot.value);
    if (text === undefined) continue;
    out.set(artifactIdFor(text), { callId: slot.callId, value: slot.value });
    // A one-text-part output is vaulted as its text by the tool stage, as the part list by the request stages.
    const inner =
      Array.isArray(slot.value) && slot.value.length === 1 && isObj(slot.value[0]) ? slot.value[0]['text'] : undefined;
    if (typeof inner === 'string') out.set(artifactIdFor(inner), { callId: slot.callId, value: slot.value });
  }
  return out;
}

/** What {@link showExchanges} made of a caller's request. */
export interface ShownExchanges {
  /** The request with the exchanges that still have to be shown inserted. */
  readonly request: ProviderRequest;
  /** Call id → the caller's own output, for the outputs a recovery brought back: they are shown as sent. */
  readonly rejoined: ReadonlyMap<string, unknown>;
}

/**
 * {@link applyExchanges}, except that a recovered artifact rejoins the working set: an exchange
 * whose every call recovered (part of) an output the request itself carries is not inserted
 * again, and that output is shown as the caller sent it ({@link rejoinOutputs}), so the model sees
 * it once. Only an exchange of this conversation (its anchor item is in the request) rejoins: a
 * new conversation reusing the session id gets its own first view.
 */
export function showExchanges(
  request: ProviderRequest,
  format: RecoveryWireFormat,
  state: RecoveryState,
): ShownExchanges {
  if (state.exchanges.length === 0 || serverSideState(request, format))
    return { request: applyExchanges(request, format, state), rejoined: new Map() };
  let outputs: Map<string, { callId: string; value: unknown }> | undefined;
  const rejoined = new Map<string, unknown>();
  let items: readonly unknown[] | undefined;
  const kept = state.exchanges.filter((e) => {
    items ??= conversationItems(request, format);
    if (e.anchor < 1 || e.anchor > items.length || !anchoredAfter(e, items[e.anchor - 1])) return true;
    const ids = recoveredIds(e.items);
    if (ids === undefined) return true;
    outputs ??= callerOutputs(request, format);
    const found = ids.map((id) => outputs!.get(id));
    if (found.some((f) => f === undefined)) return true;
    for (const f of found) rejoined.set(f!.callId, f!.value);
    return false;
  });
  const shown = applyExchanges(
    request,
    format,
    kept.length === state.exchanges.length ? state : { ...state, exchanges: kept },
  );
  return { request: shown, rejoined };
}

/** `reduced` with every rejoined output written back as the caller sent it (by call id). */
export function rejoinOutputs(
  reduced: ProviderRequest,
  format: RecoveryWireFormat,
  rejoined: ReadonlyMap<string, unknown>,
): ProviderRequest {
  if (rejoined.size === 0) return reduced;
  const changes: SlotChange[] = [];
  for (const slot of readRequest(reduced, { format }).slots) {
    if (slot.kind !== 'tool_output' || slot.callId === undefined || !rejoined.has(slot.callId)) continue;
    const value = rejoined.get(slot.callId);
    if (value !== slot.value) changes.push({ path: slot.path, value });
  }
  return changes.length === 0 ? reduced : writeSlots(reduced, changes);
}
