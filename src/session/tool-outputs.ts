/**
 * Tool outputs a request shows for the first time (on the host path, src/runtime/host-path.ts: the
 * gateway, the client wrappers and the Agents JS input filter, whose hosts hand tool results to no
 * hook of ours) go through the tool-result stream as a host would send them at source. The
 * rendering is remembered in the vault's session renderings, so every later request, from this
 * process, a restarted one or another replica on the same store, shows that output byte-identically;
 * a map held in the Session keeps an output seen before off the database.
 *
 * Only string outputs and outputs of exactly one text part are touched; other shapes pass as they
 * are. An output that already names an artifact was reduced at source and is not reduced again.
 */
import { createHash } from 'node:crypto';
import { createDigests, namedIdentity, type Digests } from '../ledger/digests.js';
import type { Terminator } from '../runtime/types.js';
import { readRequest, writeSlots, type SlotChange } from '../model/index.js';
import { sameJson } from '../model/prefix.js';
import { referencedArtifacts } from '../receipts/index.js';
import { isRecoveryResult } from '../receipts/recovery-results.js';
import type { RecoveryWireFormat } from '../recovery/formats.js';
import { REPLAY_TOOL_NAMES } from '../tools/names.js';
import { savedByStage } from '../telemetry/metrics.js';
import { sessionStateKey, type Decision, type ProviderRequest, type StepContext } from '../step.js';

const KEY_PREFIX = 'proxy.tool.v1:';
const UNCHANGED = '=';
const CHANGED = '>';

/**
 * A map bounded in entries, the least recently written going first (a read does not refresh an
 * entry, a write does), that counts the characters it holds. Not lru-cache: its `max` allocates
 * index arrays for every entry up front.
 */
export class BoundedMap<V> {
  readonly #map = new Map<string, V>();
  readonly #max: number;
  readonly #charsOf: (key: string, value: V) => number;
  #chars = 0;

  constructor(max: number, charsOf: (key: string, value: V) => number) {
    this.#max = max;
    this.#charsOf = charsOf;
  }

  get(key: string): V | undefined {
    return this.#map.get(key);
  }

  set(key: string, value: V): void {
    const old = this.#map.get(key);
    if (old !== undefined) this.#chars -= this.#charsOf(key, old);
    this.#map.delete(key);
    this.#map.set(key, value);
    this.#chars += this.#charsOf(key, value);
    while (this.#map.size > this.#max) {
      const [k, v] = this.#map.entries().next().value!;
      this.#map.delete(k);
      this.#chars -= this.#charsOf(k, v);
    }
  }

  /** Entries kept. */
  get size(): number {
    return this.#map.size;
  }

  /** Characters held, as `charsOf` counts them. */
  get chars(): number {
    return this.#chars;
  }
}

/** A request with its tool outputs reduced, plus what that saved. */
export interface ToolOutputResult {
  /** The request with every reduced output in place. */
  readonly request: ProviderRequest;
  /** True when any output is shown differently from how the client sent it. */
  readonly changed: boolean;
  /** The request as the client sent it, built from stable objects (same content), for cheap measuring. */
  readonly measured: ProviderRequest;
  /** Outputs reduced for the first time in this request. */
  readonly firstSeen: number;
  /** Saved chars per stage for the outputs reduced in this request. */
  readonly saved: Readonly<Record<string, number>>;
  /** The `failed_open` decisions of the outputs reduced in this request (each shown as sent). */
  readonly failedOpen: readonly Decision[];
}

type Text = { readonly text: string; readonly write: (text: string) => unknown };

/** The text of an output slot, and how to write a new text back into the same shape. */
function textOf(value: unknown): Text | undefined {
  if (typeof value === 'string') return { text: value, write: (text) => text };
  if (Array.isArray(value) && value.length === 1) {
    const part = value[0] as Record<string, unknown> | null;
    if (
      part !== null &&
      typeof part === 'object' &&
      typeof part['text'] === 'string' &&
      (part['type'] === 'text' || part['type'] === 'input_text')
    ) {
      return { text: part['text'], write: (text) => [{ ...part, text }] };
    }
  }
  return undefined;
}

type SlotResult = Omit<ToolOutputResult, 'changed' | 'measured'> & {
  /** Items with an output whose stage failed open (not remembered, tried again next time). */
  readonly retry: ReadonlySet<number>;
};

async function renderSlots(
  terminator: Terminator,
  request: ProviderRequest,
  format: RecoveryWireFormat,
  context: StepContext,
  cache: BoundedMap<string>,
  digests: Digests,
  only: ReadonlySet<number> | undefined,
  signal: AbortSignal | undefined,
): Promise<SlotResult> {
  const view = readRequest(request, { format });
  const retry = new Set<number>();
  const toolNames = terminator.config.toolNames;
  const changes: SlotChange[] = [];
  const saved: Record<string, number> = {};
  const failedOpen: Decision[] = [];
  let firstSeen = 0;
  const aborted = (): boolean => signal?.aborted === true;
  for (const slot of view.slots) {
    if (aborted()) {
      // Not reduced now: neither remembered nor stored, so a later request reduces it.
      if (slot.item !== undefined) retry.add(slot.item);
      continue;
    }
    if (slot.kind !== 'tool_output' || (only !== undefined && (slot.item === undefined || !only.has(slot.item))))
      continue;
    const hostName = slot.toolName ?? 'tool';
    if (isRecoveryResult(slot)) continue;
    const text = textOf(slot.value);
    if (text === undefined || text.text === '' || referencedArtifacts(text.text).length > 0) continue;
    // The output is named by its ledger digest: the tool stage's put reuses it, never hashed again.
    const key = `${KEY_PREFIX}${createHash('sha256')
      .update(`${slot.callId ?? ''}\u0000${hostName}\u0000${digests.of(text.text)}`)
      .digest('hex')
      .slice(0, 40)}`;
    let stored = cache.get(key) ?? (await terminator.vault.getRendering(sessionStateKey(context), key));
    if (stored === undefined) {
      const name = toolNames[hostName] ?? REPLAY_TOOL_NAMES[hostName] ?? hostName;
      const step = await terminator.reduceToolResult(
        { callId: slot.callId ?? '', name, args: slot.callArgs ?? {}, content: text.text },
        context,
        signal,
      );
      if (aborted()) {
        if (slot.item !== undefined) retry.add(slot.item);
        continue;
      }
      const content = step.value.content;
      const failed = step.decisions.filter((d) => d.kind === 'failed_open');
      failedOpen.push(...failed);
      const rendering = typeof content === 'string' && content !== text.text ? `${CHANGED}${content}` : UNCHANGED;
      if (failed.length > 0 && rendering === UNCHANGED) {
        // A stage that failed open is not remembered in the store: a later request, a restart or
        // another replica tries again. A full vault refuses every output until retention frees room
        // (sessions end or expire), so trying each refused output again in every later request would
        // cost the whole history per request: in this process it is shown as sent from now on.
        if (failed.some(refusedForCapacity)) cache.set(key, UNCHANGED);
        else if (slot.item !== undefined) retry.add(slot.item);
        continue;
      }
      // Another replica may have rendered it first: its rendering is the one the model saw.
      stored = (await terminator.vault.getRendering(sessionStateKey(context), key)) ?? rendering;
      if (stored === rendering) {
        await terminator.vault.setRendering(sessionStateKey(context), key, rendering);
        savedByStage(step.decisions, saved);
      }
      firstSeen++;
    }
    cache.set(key, stored);
    if (stored.startsWith(CHANGED)) changes.push({ path: slot.path, value: text.write(stored.slice(1)) });
  }
  return { request: writeSlots(request, changes), firstSeen, saved, retry, failedOpen };
}

/** Whether a decision is a stage that failed open because the vault is full (E_VAULT_CAPACITY). */
export function refusedForCapacity(d: Decision): boolean {
  return d.kind === 'failed_open' && (d.error ?? '').endsWith(':E_VAULT_CAPACITY');
}

/** What one client item was shown as; `original` is the first copy of the client's item (a stable object for measuring). */
type Entry = {
  readonly item: unknown;
  readonly original: unknown;
  readonly changed: boolean;
  /** JSON characters of the client's item, when remembered by digest. */
  readonly chars?: number;
};

/**
 * What a session's host path remembers (held by its Session, freed with it): each conversation
 * item as the host sent it → the item as the pipeline is shown it, the same object every time (the
 * request stages memoize per item object, so a re-sent history, parsed anew from every body, costs
 * them lookups, not recomputation), the renderings of its tool outputs read or written, and whether
 * the recovery tool was offered. A history that grows by appending (the common case) is matched
 * position by position against the previous request, by structural comparison; items that moved
 * are found by digest.
 */
export class HostMemo {
  /** The previous request's items as the client sent them, and what each was shown as. */
  last: readonly unknown[] = [];
  lastEntries: readonly (Entry | undefined)[] = [];
  /** Digest of an item as the client sent it → what it was shown as (for items that moved). */
  readonly items = new BoundedMap<Entry>(4096, (_, entry) => entry.chars ?? 0);
  /** Rendering key → the stored rendering. */
  readonly renderings = new BoundedMap<string>(4096, (key, value) => key.length + value.length);
  /** The ledger items are named by when the Terminator has none of its own (made on first use). */
  digests: Digests | undefined;
  /** The recovery tool was offered: it stays, same place, every request (the prefix stays cached). */
  offered = false;

  /** Characters held (items and renderings), for the session's bound in bytes. */
  get chars(): number {
    return this.items.chars + this.renderings.chars;
  }
}

/**
 * Reduce the tool outputs a request shows for the first time and replay remembered renderings of
 * the others; items seen before in the session come back as the very objects shown last time.
 * Store failures propagate (the caller fails open on the whole request). Once `signal` is aborted
 * the outputs not reduced yet are shown as sent (the host forwards the whole request as sent).
 */
export async function renderToolOutputs(
  terminator: Terminator,
  request: ProviderRequest,
  format: RecoveryWireFormat,
  context: StepContext,
  host: HostMemo,
  signal?: AbortSignal,
): Promise<ToolOutputResult> {
  const key = format === 'responses' ? 'input' : 'messages';
  const list = request[key];
  // The runtime's item ledger (a Terminator without one: this memo's own).
  const digests = terminator.digests ?? (host.digests ??= createDigests());
  if (!Array.isArray(list)) {
    const { retry: _, ...out } = await renderSlots(
      terminator,
      request,
      format,
      context,
      host.renderings,
      digests,
      undefined,
      signal,
    );
    return { ...out, changed: out.request !== request, measured: request };
  }
  const found: (Entry | undefined)[] = list.map((item, i) =>
    i < host.last.length && host.lastEntries[i] !== undefined && sameJson(item, host.last[i])
      ? host.lastEntries[i]
      : undefined,
  );
  const identities = new Map<number, { digest: string; chars: number }>();
  const misses = new Set<number>();
  found.forEach((entry, i) => {
    if (entry !== undefined) return;
    const digest = namedIdentity(list[i], digests);
    identities.set(i, digest);
    const hit = host.items.get(digest.digest);
    if (hit !== undefined) found[i] = hit;
    else misses.add(i);
  });
  const out =
    misses.size === 0
      ? undefined
      : await renderSlots(terminator, request, format, context, host.renderings, digests, misses, signal);
  const rendered = (out?.request[key] as unknown[] | undefined) ?? list;
  let changed = false;
  const entries = rendered.map((item, i): Entry | undefined => {
    const hit = found[i];
    if (hit !== undefined) return hit;
    if (out?.retry.has(i)) return undefined;
    const { digest, chars } = identities.get(i) ?? namedIdentity(list[i], digests);
    const entry = { item, original: list[i], changed: item !== list[i], chars };
    host.items.set(digest, entry);
    return entry;
  });
  const items = entries.map((entry, i) => {
    changed ||= entry?.changed ?? rendered[i] !== list[i];
    return entry?.item ?? rendered[i];
  });
  host.last = list;
  host.lastEntries = entries;
  const measured = { ...request, [key]: entries.map((entry, i) => entry?.original ?? list[i]) };
  return {
    request: { ...(out?.request ?? request), [key]: items },
    changed,
    measured,
    firstSeen: out?.firstSeen ?? 0,
    saved: out?.saved ?? {},
    failedOpen: out?.failedOpen ?? [],
  };
}
