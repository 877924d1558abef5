/**
 * Context compaction planning for `compileRequest`: receipts for large tool outputs of sealed
 * steps, and lossless collapse of the oldest steps into vaulted blocks. Both horizons advance
 * only in whole blocks of steps (see docs/cache-policy.md), and every rendering is memoized, so
 * between two boundaries the compiled history is byte-identical from request to request.
 */
import { canonicalJson } from '../measure/index.js';
import { isReceipt } from '../receipts/index.js';
import type { RequestView, Slot } from '../model/types.js';
import { renderItems } from './apply.js';
import { collapseItems, collapseNoteLine } from './collapse.js';
import { evidenceChars, evidenceText } from './evidence.js';
import type { SessionState } from './session.js';
import { horizons, segmentSteps, type CompactionPolicy } from './steps.js';

export interface CompactionOptions extends CompactionPolicy {
  readonly sessionId: string;
  /** Tool outputs of sealed steps at least this long become receipts. */
  readonly minVaultChars: number;
  readonly maxArtifactChars: number;
}

export interface CompactionPlan {
  readonly items: readonly unknown[];
  readonly receipts: readonly { readonly artifactId: string; readonly verified: boolean }[];
  readonly receiptedOutputs: number;
  readonly collapsedSteps: number;
}

interface Block {
  readonly line: string;
  readonly artifactId: string;
}

/** True when the readable text of a tool output (a string, or its last text part) ends in a receipt line. */
function endsInReceipt(value: unknown): boolean {
  const last = Array.isArray(value) ? (value.at(-1) as { text?: unknown } | undefined)?.text : value;
  return typeof last === 'string' && isReceipt(last.slice(last.lastIndexOf('\n') + 1));
}

/** Plan the compacted conversation; undefined when no step is old enough. */
export async function planCompaction(state: SessionState, view: RequestView, o: CompactionOptions): Promise<CompactionPlan | undefined> {
  const steps = segmentSteps(view.itemInfo);
  const h = horizons(steps.starts.length, o);
  if (h.sealed === 0) return undefined;
  const cut = h.collapsed > 0 ? steps.starts[h.collapsed]! : steps.headEnd;
  const sealedEnd = h.sealed < steps.starts.length ? steps.starts[h.sealed]! : view.items.length;
  const receipts: { artifactId: string; verified: boolean }[] = [];

  // Receipts for large outputs of sealed steps that stay visible (not collapsed).
  const changes: { slot: Slot; text: string }[] = [];
  for (const slot of view.slots) {
    if (slot.kind !== 'tool_output' || slot.item === undefined || slot.item < cut || slot.item >= sealedEnd) continue;
    if (typeof slot.value === 'string' && slot.value.length < o.minVaultChars) continue;
    const text = evidenceText(slot.value);
    // Already reduced upstream (a bounded view ending in its receipt, possibly handed back by the
    // host inside a text block): leave it exactly as it is.
    if (text === undefined || endsInReceipt(slot.value)) continue;
    const chars = evidenceChars(slot.value);
    if (chars < o.minVaultChars || chars > o.maxArtifactChars) continue;
    try {
      const r = await state.evidence.receipt(text, { toolName: slot.toolName ?? 'tool', args: slot.callArgs ?? {}, sessionId: o.sessionId, ...(slot.callId ? { callId: slot.callId } : {}) });
      changes.push({ slot, text: r.text });
      receipts.push(r);
    } catch {
      // A vault failure leaves this output inline; the rest still compacts.
    }
  }
  let items: readonly unknown[] = renderItems(state, view, changes) ?? view.items;

  // Collapse whole blocks of the oldest steps, one vaulted artifact per block.
  let collapsedSteps = 0;
  if (h.collapsed > 0) {
    const lines: string[] = [];
    for (let first = 0; first < h.collapsed; first += o.blockSteps) {
      const last = Math.min(first + o.blockSteps, h.collapsed) - 1;
      const from = steps.starts[first]!;
      const to = last + 1 < steps.starts.length ? steps.starts[last + 1]! : view.items.length;
      const blockItems = view.items.slice(from, to);
      const key = `collapse:${first}:${blockItems.map((it) => state.meter.measure(it).hash).join(',')}`;
      let block = state.sticky.get(key) as Block | undefined;
      if (block === undefined) {
        const stored = await state.evidence.store(canonicalJson(blockItems), o.sessionId, 'collapsed_turns');
        block = { line: collapseNoteLine(first, last, blockItems.length, stored.artifactId, stored.chars), artifactId: stored.artifactId };
        state.sticky.set(key, block);
      }
      lines.push(block.line);
      receipts.push({ artifactId: block.artifactId, verified: true });
    }
    const noteText = lines.join('\n');
    const collapsed = collapseItems({ format: view.format, items, info: view.itemInfo, headEnd: steps.headEnd, cut, note: noteText });
    items = collapsed;
    collapsedSteps = h.collapsed;
  }
  if (items === view.items) return undefined;
  return { items, receipts, receiptedOutputs: changes.length, collapsedSteps };
}
