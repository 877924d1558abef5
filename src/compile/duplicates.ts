/**
 * Planning for `collapseDuplicates`: which large tool outputs of a request stay inline, which
 * become receipts (earlier same-request copies, spent leases) and which inline exposures are
 * rendered as a bounded view plus a receipt because they are too large to show whole.
 */
import type { RequestView, Slot } from '../model/types.js';
import { codePoints } from '../measure/index.js';
import { evidenceText, type Receipted } from './evidence.js';
import type { SessionState } from './session.js';

export interface DuplicateOptions {
  readonly sessionId: string;
  /** Exposure key of this request (request id, or lease block). */
  readonly leaseKey: string;
  readonly minChars: number;
  readonly maxChars: number;
  /** Inline exposures larger than this show a bounded view + receipt (0 = never). */
  readonly maxInlineChars: number;
  readonly viewChars: number;
}

interface PlannedBase {
  readonly slot: Slot;
  readonly receipt: Receipted;
  readonly duplicate: boolean;
}

/**
 * One managed output. 'receipt' (duplicate or spent lease) and 'view' (lease pending, bounded)
 * carry the text that replaces the slot's value; 'inline' (lease pending claim) carries none: the
 * caller's value stays exactly as it is (same object, same shape — a text-block list stays a list).
 */
export type PlannedSlot = PlannedBase & ({ readonly render: 'inline' } | { readonly render: 'receipt' | 'view'; readonly text: string });

/**
 * The slot replacements a plan writes back. Inline outputs contribute none (unless their lease
 * was lost to another process, in which case they become receipts), so writing the plan never
 * re-renders an inline value from its vaulted text.
 */
export function planChanges(plan: readonly PlannedSlot[], lost: ReadonlySet<string> = new Set()): { readonly slot: Slot; readonly text: string }[] {
  const changes: { slot: Slot; text: string }[] = [];
  for (const p of plan) {
    if (lost.has(p.receipt.artifactId)) changes.push({ slot: p.slot, text: p.receipt.text });
    else if (p.render !== 'inline') changes.push({ slot: p.slot, text: p.text });
  }
  return changes;
}

interface Evidence {
  readonly chars: number;
  readonly receipt: Receipted;
  /** What a bounded view shows: the text itself, or a text-block list's texts (never its JSON). */
  readonly display: string;
}

/** The readable text of a receiptable output: a string as is, a text-part list's texts one after another. */
function displayText(value: unknown, evidence: string): string {
  if (!Array.isArray(value)) return evidence;
  return value.map((part) => String((part as { text?: unknown }).text ?? '')).join('\n');
}

async function evidenceOf(state: SessionState, view: RequestView, slot: Slot, o: DuplicateOptions): Promise<Evidence | null> {
  const item = view.items[slot.item ?? -1];
  const key = JSON.stringify(slot.path.slice(2)) + `|${o.minChars}|${o.maxChars}`;
  const holder = typeof item === 'object' && item !== null ? item : undefined;
  const cached = holder === undefined ? undefined : state.itemMemo.get(holder)?.get(key) as Evidence | null | undefined;
  if (cached !== undefined) return cached;
  let found: Evidence | null = null;
  const raw = slot.value;
  if (!(typeof raw === 'string' && raw.length < o.minChars)) {
    const text = evidenceText(raw);
    const chars = text === undefined ? 0 : codePoints(text);
    if (text !== undefined && chars >= o.minChars && chars <= o.maxChars) {
      try {
        const meta = { toolName: slot.toolName ?? 'tool', args: slot.callArgs ?? {}, sessionId: o.sessionId, ...(slot.callId ? { callId: slot.callId } : {}) };
        found = { chars, receipt: await state.evidence.receipt(text, meta), display: displayText(raw, text) };
      } catch {
        found = null; // this slot stays inline; the others still reduce
      }
    }
  }
  if (holder !== undefined) {
    let map = state.itemMemo.get(holder);
    if (map === undefined) state.itemMemo.set(holder, (map = new Map()));
    map.set(key, found);
  }
  return found;
}

/** Decide every large tool output of a request (leases are only preflighted here, never claimed). */
export async function planDuplicates(state: SessionState, view: RequestView, o: DuplicateOptions): Promise<PlannedSlot[]> {
  const found: { slot: Slot; ev: Evidence }[] = [];
  for (const slot of view.slots) {
    if (slot.kind !== 'tool_output' || slot.item === undefined) continue;
    const ev = await evidenceOf(state, view, slot, o);
    if (ev !== null) found.push({ slot, ev });
  }
  // The inline copy of an artifact is the newest one, unless an earlier request already showed an
  // older copy inline: then that copy stays (it renders as before) and the new copies are receipts.
  const lastIndex = new Map<string, number>();
  found.forEach((f, i) => {
    const id = f.ev.receipt.artifactId;
    const shown = state.sticky.get(`inline:${id}`);
    if (lastIndex.has(id) && JSON.stringify(found[lastIndex.get(id)!]!.slot.path) === shown) return;
    lastIndex.set(id, i);
  });
  const planned: PlannedSlot[] = [];
  for (let i = 0; i < found.length; i++) {
    const { slot, ev } = found[i]!;
    const id = ev.receipt.artifactId;
    if (lastIndex.get(id) !== i) {
      planned.push({ slot, receipt: ev.receipt, render: 'receipt', duplicate: true, text: ev.receipt.text });
      continue;
    }
    const inline = await state.leases.available(id, o.leaseKey);
    if (!inline) planned.push({ slot, receipt: ev.receipt, render: 'receipt', duplicate: false, text: ev.receipt.text });
    else if (o.maxInlineChars > 0 && ev.chars > o.maxInlineChars) {
      planned.push({ slot, receipt: ev.receipt, render: 'view', duplicate: false, text: `${boundedView(ev.display, o.viewChars)}\n\n${ev.receipt.text}` });
    } else planned.push({ slot, receipt: ev.receipt, render: 'inline', duplicate: false });
  }
  return planned;
}

/**
 * A bounded view of a long text on whole lines: the first lines (about 70 % of the budget), a
 * marker naming how many lines were left out, then the last lines. Lines longer than the budget
 * are cut. Deterministic, so the same evidence always renders the same view.
 */
export function boundedView(text: string, maxChars: number): string {
  const lines = text.split('\n');
  const clip = (l: string, n: number): string => (l.length <= n ? l : `${l.slice(0, Math.max(0, n - 1))}\u2026`);
  let headBudget = Math.floor(maxChars * 0.7);
  let tailBudget = maxChars - headBudget;
  const head: string[] = [];
  const tail: string[] = [];
  let i = 0;
  let j = lines.length - 1;
  while (i <= j && headBudget > 0) {
    const l = clip(lines[i]!, headBudget - 1);
    headBudget -= l.length + 1;
    head.push(l);
    i++;
  }
  while (j >= i && tailBudget > 0) {
    const l = clip(lines[j]!, tailBudget - 1);
    tailBudget -= l.length + 1;
    tail.unshift(l);
    j--;
  }
  const omitted = j - i + 1;
  return omitted > 0 ? [...head, `\u2026 ${omitted} lines omitted (exact output: see the receipt below) \u2026`, ...tail].join('\n') : [...head, ...tail].join('\n');
}
