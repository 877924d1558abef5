/**
 * "Nothing refers to what the request does not show" (docs/fidelity.md): a temporal delta whose
 * base output is not shown inline, in full, in the same request is replaced by the first view of
 * the current output it stands for (left in the session's renderings under `deltaViewKey`), else
 * by that output itself, recovered exactly from the vault. A session id reused by a new
 * conversation therefore never gets "no output changes since the previous execution".
 */
import { sharedLead } from '../model/prefix.js';
import type { RequestView, Slot } from '../model/types.js';
import { deltaViewKey } from '../compact/temporal-delta.js';
import { artifactIdFor } from '../vault/index.js';
import type { SessionState } from './session.js';
import { evidenceText } from './evidence.js';
import { WeakMemo } from '../weak-memo.js';

const DELTA_PREFIX = '[Token Terminator temporal delta';
const DELTA =
  /^\[Token Terminator temporal delta(?:: [^|\]]*)? \| current=(a_[0-9a-f]{32}(?:[0-9a-f]{32})?) \| previous=(a_[0-9a-f]{32}(?:[0-9a-f]{32})?) \|/;

/** The artifacts a temporal-delta rendering names; undefined for any other text. */
export function parseDelta(text: string): { readonly current: string; readonly previous: string } | undefined {
  if (!text.startsWith(DELTA_PREFIX)) return undefined;
  const m = DELTA.exec(text);
  return m === null ? undefined : { current: m[1]!, previous: m[2]! };
}

/**
 * Whether a tool output's text (as {@link slotText} reads it) starts with `prefix`; undefined when
 * the value has no text. Joins no parts, so a request's outputs are checked without copying them.
 */
export function textStartsWith(value: unknown, prefix: string): boolean | undefined {
  if (typeof value === 'string') return value.startsWith(prefix);
  if (!Array.isArray(value)) return undefined;
  let head = '';
  for (let i = 0; i < value.length; i++) {
    const p: unknown = value[i];
    const t = typeof p === 'object' && p !== null ? (p as { text?: unknown }).text : undefined;
    if (typeof t !== 'string') return undefined;
    if (head.length < prefix.length) head += (i === 0 ? '' : '\n') + t.slice(0, prefix.length);
  }
  return head.startsWith(prefix);
}

/** Whether `parseDelta(slotText(value) ?? '')` can be defined (a prefix test, see {@link textStartsWith}). */
export const mayBeDelta = (value: unknown): boolean => textStartsWith(value, DELTA_PREFIX) === true;

/** What {@link firstOutput} carries from one request's outputs to the next. */
export interface OutputScan {
  readonly test: (slot: Slot) => boolean;
  readonly outputs: readonly Slot[];
  /** Index of the first output that passed the test; -1: none did. */
  readonly first: number;
}

/**
 * Index of the first of `outputs` that passes `test` (a function of the slot alone), else -1. The
 * outputs the list shares, from its start, with the last scan's (the same slot objects: a grown
 * history's) are not tested again: only the new ones are. The scan is kept in `memo.outputScan`,
 * with `outputs` (a request's own list, which its caller never changes: kept, not copied).
 */
export function firstOutput(
  memo: { outputScan?: OutputScan },
  outputs: readonly Slot[],
  test: (slot: Slot) => boolean,
): number {
  const last = memo.outputScan?.test === test ? memo.outputScan : undefined;
  const shared = last === undefined ? 0 : sharedLead(outputs, last.outputs, undefined);
  // None of the shared outputs passed unless the last scan's first one is among them.
  let first = last !== undefined && last.first >= 0 && last.first < shared ? last.first : -1;
  for (let i = shared; first < 0 && i < outputs.length; i++) if (test(outputs[i]!)) first = i;
  memo.outputScan = { test, outputs, first };
  return first;
}

/** The readable text of a tool output slot (a string, or its text parts' texts). */
export function slotText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (!Array.isArray(value)) return undefined;
  const texts = value.map((p) => (typeof p === 'object' && p !== null ? (p as { text?: unknown }).text : undefined));
  return texts.every((t) => typeof t === 'string') ? (texts as string[]).join('\n') : undefined;
}

/** The artifact ids of outputs shown inline, kept by the session ({@link danglingDeltas}). */
export interface InlineIds {
  /** By output value (an object). */
  readonly ids: WeakMemo<object, string>;
  /** Ids of string outputs, per conversation item and path below it (a string cannot key a WeakMap). */
  readonly stringIds: WeakMemo<object, Map<string, string>>;
}

/** An empty {@link InlineIds}. */
export const createInlineIds = (): InlineIds => ({ ids: new WeakMemo(), stringIds: new WeakMemo() });

/** The artifact id an output shown inline would have (content-addressed, as the vault names it), remembered per value or per item and path. */
function inlineId({ ids, stringIds }: InlineIds, slot: Slot, holder: unknown): string | undefined {
  const value = slot.value;
  const byPath =
    typeof value === 'string' && typeof holder === 'object' && holder !== null ? stringIds.get(holder) : undefined;
  const known =
    typeof value === 'object' && value !== null ? ids.get(value) : byPath?.get(JSON.stringify(slot.path.slice(2)));
  if (known !== undefined) return known;
  const text = typeof value === 'string' ? value : evidenceText(value);
  if (text === undefined) return undefined;
  const id = artifactIdFor(text);
  if (typeof value === 'object' && value !== null) ids.set(value, id);
  else if (typeof holder === 'object' && holder !== null) {
    let map = stringIds.get(holder);
    if (map === undefined) stringIds.set(holder, (map = new Map()));
    map.set(JSON.stringify(slot.path.slice(2)), id);
  }
  return id;
}

/** Every tool output of the request that is a delta whose base output is not shown inline in it. */
export function danglingDeltas(
  known: InlineIds,
  view: RequestView,
  outputs: readonly Slot[] = view.slots.filter((s) => s.kind === 'tool_output'),
): { slot: Slot; current: string }[] {
  const deltas = outputs.flatMap((slot) => {
    if (!mayBeDelta(slot.value)) return [];
    const text = slotText(slot.value);
    const d = text === undefined ? undefined : parseDelta(text);
    return d === undefined ? [] : [{ slot, ...d }];
  });
  if (deltas.length === 0) return [];
  const visible = new Set<string>();
  for (const slot of outputs) {
    if (textStartsWith(slot.value, '[Token Terminator') !== false) continue;
    const id = inlineId(known, slot, view.items[slot.item ?? -1]);
    if (id !== undefined) visible.add(id);
  }
  return deltas.filter((d) => !visible.has(d.previous)).map((d) => ({ slot: d.slot, current: d.current }));
}

/**
 * The replacements that resolve dangling deltas: each becomes the first view the tool stage left
 * for its current output (the session's rendering under `deltaViewKey`), or, when there is none or
 * it was the output itself, the exact current output; both read in the session's scope. An artifact
 * the vault cannot return, or one outside the scope (a delta line is request text, and text never
 * widens the scope), leaves its delta as it is (fail-open; the decision records it).
 */
export async function resolveDanglingDeltas(
  state: Pick<SessionState, 'reads' | 'inlineIds' | 'vault'>,
  view: RequestView,
  outputs?: readonly Slot[],
): Promise<{ resolved: { slot: Slot; text: string }[]; unresolved: number }> {
  const resolved: { slot: Slot; text: string }[] = [];
  let unresolved = 0;
  const { reads } = state;
  for (const d of danglingDeltas(state.inlineIds, view, outputs)) {
    try {
      const first = await state.vault.getRendering(reads.scope.sessionId ?? '', deltaViewKey(d.current));
      // The view's receipt names the current output: shown only while that output is in scope.
      if (first?.startsWith('>') === true && (await reads.verify(d.current)))
        resolved.push({ slot: d.slot, text: first.slice(1) });
      else resolved.push({ slot: d.slot, text: await reads.read(d.current) });
    } catch {
      unresolved++;
    }
  }
  return { resolved, unresolved };
}
