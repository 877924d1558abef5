/**
 * Tool outputs inside a request, seen by the proxy for the first time, go through the tool-result
 * stream exactly as a host would send them at source; the rendering is remembered in the store
 * (the vault's session renderings) so every later request, from this process, a restarted one or
 * another replica on the same store, shows that output byte-identically. An in-process map in
 * front of the store keeps the common case (an output seen before) off the database.
 *
 * Only string outputs and outputs of exactly one text part are touched; other shapes pass as they
 * are and the request stages still see them.
 */
import { createHash } from 'node:crypto';
import type { Terminator } from '../../src/runtime-types.js';
import { readRequest, writeSlots, type SlotChange } from '../../src/model/index.js';
import { RECOVERY_TOOL_NAME } from '../../src/recovery/schema.js';
import type { RecoveryWireFormat } from '../../src/recovery/formats.js';
import { REPLAY_TOOL_NAMES } from '../../src/replay/replay.js';
import { savedByStage } from '../../src/telemetry/metrics.js';
import type { ProviderRequest, StepContext } from '../../src/step.js';

const KEY_PREFIX = 'proxy.tool.v1:';
const UNCHANGED = '=';
const CHANGED = '>';

/** A bounded map of renderings already read or written (session + key → stored value). */
export class RenderingCache {
  readonly #max: number;
  readonly #map = new Map<string, string>();

  constructor(max = 50_000) {
    this.#max = max;
  }

  get(key: string): string | undefined {
    return this.#map.get(key);
  }

  set(key: string, value: string): void {
    this.#map.delete(key);
    this.#map.set(key, value);
    if (this.#map.size > this.#max) this.#map.delete(this.#map.keys().next().value as string);
  }
}

export interface ToolOutputResult {
  readonly request: ProviderRequest;
  /** Outputs reduced for the first time in this request. */
  readonly firstSeen: number;
  /** Saved chars per stage for the outputs reduced in this request. */
  readonly saved: Readonly<Record<string, number>>;
}

type Text = { readonly text: string; readonly write: (text: string) => unknown };

/** The text of an output slot, and how to write a new text back into the same shape. */
function textOf(value: unknown): Text | undefined {
  if (typeof value === 'string') return { text: value, write: (text) => text };
  if (Array.isArray(value) && value.length === 1) {
    const part = value[0] as Record<string, unknown> | null;
    if (part !== null && typeof part === 'object' && typeof part['text'] === 'string' && (part['type'] === 'text' || part['type'] === 'input_text')) {
      return { text: part['text'], write: (text) => [{ ...part, text }] };
    }
  }
  return undefined;
}

/**
 * Reduce the tool outputs a request shows for the first time and replay remembered renderings of
 * the others. Store failures propagate (the caller fails open on the whole request).
 */
export async function renderToolOutputs(
  terminator: Terminator,
  request: ProviderRequest,
  format: RecoveryWireFormat,
  context: StepContext,
  cache: RenderingCache,
): Promise<ToolOutputResult> {
  const view = readRequest(request, { format });
  const toolNames = terminator.config.toolNames;
  const changes: SlotChange[] = [];
  const saved: Record<string, number> = {};
  let firstSeen = 0;
  for (const slot of view.slots) {
    if (slot.kind !== 'tool_output') continue;
    const hostName = slot.toolName ?? 'tool';
    if (hostName === RECOVERY_TOOL_NAME) continue;
    const text = textOf(slot.value);
    if (text === undefined || text.text === '') continue;
    const key = `${KEY_PREFIX}${createHash('sha256').update(`${slot.callId ?? ''}\u0000${hostName}\u0000${text.text}`).digest('hex').slice(0, 40)}`;
    const cacheKey = `${context.sessionId}\u0000${key}`;
    let stored = cache.get(cacheKey) ?? (await terminator.vault.getRendering(context.sessionId, key));
    if (stored === undefined) {
      const name = toolNames[hostName] ?? REPLAY_TOOL_NAMES[hostName] ?? hostName;
      const step = await terminator.reduceToolResult({ callId: slot.callId ?? '', name, args: slot.callArgs ?? {}, content: text.text }, context);
      const content = step.value.content;
      const failed = step.decisions.some((d) => d.kind === 'failed_open');
      const rendering = typeof content === 'string' && content !== text.text ? `${CHANGED}${content}` : UNCHANGED;
      // A stage that failed open is not remembered: the next request tries again.
      if (failed && rendering === UNCHANGED) continue;
      // Another replica may have rendered it first: its rendering is the one the model saw.
      stored = (await terminator.vault.getRendering(context.sessionId, key)) ?? rendering;
      if (stored === rendering) {
        await terminator.vault.setRendering(context.sessionId, key, rendering);
        savedByStage(step.decisions, saved);
      }
      firstSeen++;
    }
    cache.set(cacheKey, stored);
    if (stored.startsWith(CHANGED)) changes.push({ path: slot.path, value: text.write(stored.slice(1)) });
  }
  return { request: writeSlots(request, changes), firstSeen, saved };
}
