/**
 * "Nothing refers to what the request does not show." A temporal delta (deltaRepeatedOutput) is a
 * diff against an earlier output: it means something only when that earlier output is visible, in
 * full, in the same request. The tool stage cannot see the request, so the request stages check:
 * a delta whose base is not shown inline is replaced by the current output it stands for
 * (recovered exactly from the vault). A session id reused by a new conversation therefore gets the
 * full output, never "no output changes since the previous execution".
 */
import type { RequestView, Slot } from '../model/types.js';
import { artifactIdFor } from '../vault/index.js';
import type { ArtifactStore } from '../vault/ports.js';
import { evidenceText, readWhole } from './evidence.js';

const DELTA = /^\[Token Terminator temporal delta(?:: [^|\]]*)? \| current=(a_[0-9a-f]{32}(?:[0-9a-f]{32})?) \| previous=(a_[0-9a-f]{32}(?:[0-9a-f]{32})?) \|/;

/** The artifacts a temporal-delta rendering names; undefined for any other text. */
export function parseDelta(text: string): { readonly current: string; readonly previous: string } | undefined {
  if (!text.startsWith('[Token Terminator temporal delta')) return undefined;
  const m = DELTA.exec(text);
  return m === null ? undefined : { current: m[1]!, previous: m[2]! };
}

/** The readable text of a tool output slot (a string, or its text parts' texts). */
export function slotText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (!Array.isArray(value)) return undefined;
  const texts = value.map((p) => (typeof p === 'object' && p !== null ? (p as { text?: unknown }).text : undefined));
  return texts.every((t) => typeof t === 'string') ? (texts as string[]).join('\n') : undefined;
}

const ids = new WeakMap<object, string>();

/** The artifact id an output shown inline would have (content-addressed, as the vault names it). */
function inlineId(slot: Slot): string | undefined {
  const value = slot.value;
  if (typeof value === 'object' && value !== null) {
    const known = ids.get(value);
    if (known !== undefined) return known;
  }
  const text = typeof value === 'string' ? value : evidenceText(value);
  if (text === undefined) return undefined;
  const id = artifactIdFor(text);
  if (typeof value === 'object' && value !== null) ids.set(value, id);
  return id;
}

/** Every tool output of the request that is a delta whose base output is not shown inline in it. */
export function danglingDeltas(view: RequestView, outputs: readonly Slot[] = view.slots.filter((s) => s.kind === 'tool_output')): { slot: Slot; current: string }[] {
  const deltas = outputs.flatMap((slot) => {
    const text = slotText(slot.value);
    const d = text === undefined ? undefined : parseDelta(text);
    return d === undefined ? [] : [{ slot, ...d }];
  });
  if (deltas.length === 0) return [];
  const visible = new Set<string>();
  for (const slot of outputs) {
    const text = slotText(slot.value);
    if (text === undefined || text.startsWith('[Token Terminator')) continue;
    const id = inlineId(slot);
    if (id !== undefined) visible.add(id);
  }
  return deltas.filter((d) => !visible.has(d.previous)).map((d) => ({ slot: d.slot, current: d.current }));
}

/**
 * The replacements that resolve dangling deltas: each becomes the exact current output. An artifact
 * the vault cannot return leaves its delta as it is (fail-open; the decision records it).
 */
export async function resolveDanglingDeltas(vault: ArtifactStore, view: RequestView, outputs?: readonly Slot[]): Promise<{ resolved: { slot: Slot; text: string }[]; unresolved: number }> {
  const resolved: { slot: Slot; text: string }[] = [];
  let unresolved = 0;
  for (const d of danglingDeltas(view, outputs)) {
    try {
      resolved.push({ slot: d.slot, text: await readWhole(vault, d.current) });
    } catch {
      unresolved++;
    }
  }
  return { resolved, unresolved };
}
