/**
 * What the window-fit stage (src/window/fit-window.ts) may take out of a compiled request, and in
 * which order (docs/window.md). Only two kinds of slot are ever touched: tool outputs and the prose
 * of assistant messages, both outside the instruction prefix and the newest turn. User messages,
 * tool calls and the fenced command blocks of an assistant's text stay verbatim. Every rendering
 * ends in (or carries) the receipt of the exact bytes it replaced.
 */
import { proseChars, REASONING_MIN_CHARS, reasoningRendering } from '../compile/actions.js';
import { reasoningSlots } from '../compile/history.js';
import { renderDigest } from '../compile/digest.js';
import { evidenceText } from '../compile/evidence.js';
import { slotText } from '../compile/references.js';
import { compactLines } from '../compact/compact-text.js';
import type { Digests } from '../ledger/digests.js';
import { codePoints } from '../measure/index.js';
import type { RequestView, Slot } from '../model/types.js';
import { withItems } from '../model/index.js';
import { createReceipt, isReceipt, renderReceipt } from '../receipts/index.js';
import { segmentSteps } from '../compile/steps.js';
import { referenceWords } from '../compile/working-set.js';
import { shortIdForSha } from '../vault/identity.js';

/** The reductions a fit may take (docs/window.md, the steps: what each one does to which slots). */
export const FIT_STEPS = ['reasoning', 'view', 'digest-idle', 'digest', 'receipt'] as const;
export type FitStep = (typeof FIT_STEPS)[number];

/**
 * The default order: outputs the agent still uses stay verbatim until blocks of the oldest turns
 * take them, except an oversized output ({@link DEFAULT_OVERSIZE_PCT}), viewed bounded before the
 * digests of smaller ones become bare receipts. `digest`, and `view` earlier, cost sight (the
 * orders measured are in docs/window.md).
 */
export const DEFAULT_FIT_ORDER: readonly FitStep[] = ['reasoning', 'digest-idle', 'view', 'receipt'];

/** An output above this share of W − R (percent) is oversized (the `view` step; thresholds measured in docs/window.md). */
export const DEFAULT_OVERSIZE_PCT = 20;

/** What one slot shows instead of its exact text. */
export interface Rendering {
  readonly kind: 'view' | 'digest' | 'reasoning' | 'receipt';
  readonly text: string;
  /** The exact text replaced (vaulted; the receipt recovers it byte for byte). */
  readonly evidence: string;
  readonly artifactId: string;
  readonly toolName: string;
}

/** A slot the stage may reduce: its exact text is its key in the session's sticky renderings. */
export interface FitSlot {
  readonly slot: Slot;
  readonly kind: 'output' | 'reasoning';
  /** The exact text as vaulted (a tool output's content, or one assistant text part). */
  readonly evidence: string;
  /** The text a digest or view is made from. */
  readonly shown: string;
  readonly chars: number;
  /** Reasoning: the fenced blocks of the text are the agent's actions (it made no tool call) and stay. */
  readonly keepBlocks?: boolean;
}

/** Where a request's history starts (the first assistant item) and where its newest turn starts. */
export interface Bounds {
  readonly start: number;
  readonly newest: number;
}

/** The bounds, or undefined when the request has no history (no assistant item). */
export function boundsOf(view: RequestView): Bounds | undefined {
  const start = view.itemInfo.findIndex((i) => i.role === 'assistant');
  if (start === -1) return undefined;
  const starts = segmentSteps(view.itemInfo).starts;
  return { start, newest: Math.max(start, starts.at(-1) ?? view.items.length) };
}

/** The slots of the history between the prefix and the newest turn that the stage may reduce, in item order. */
export function fitSlots(view: RequestView, b: Bounds, minChars: number): FitSlot[] {
  const out: FitSlot[] = [];
  // An assistant item that calls tools acts through the calls: its fenced blocks are prose.
  const calling = new Set<number>();
  for (const slot of view.slots)
    if (slot.kind === 'tool_call' && slot.item !== undefined) {
      calling.add(slot.item);
      if (view.format === 'responses') calling.add(slot.item - 1);
    }
  for (const slot of view.slots) {
    const i = slot.item;
    if (i === undefined || i < b.start || i >= b.newest) continue;
    if (slot.kind === 'tool_output') {
      const evidence = evidenceText(slot.value);
      const shown = slotText(slot.value);
      if (evidence === undefined || shown === undefined) continue;
      const chars = codePoints(evidence);
      if (chars >= minChars) out.push({ slot, kind: 'output', evidence, shown, chars });
    } else if (slot.kind === 'assistant' && view.itemInfo[i]?.role === 'assistant') {
      for (const part of reasoningSlots(slot)) {
        const size = calling.has(i) ? codePoints(part.text) : proseChars(part.text);
        if (part.text.startsWith('[Token Terminator') || size < REASONING_MIN_CHARS) continue;
        out.push({
          slot: part.slot,
          kind: 'reasoning',
          evidence: part.text,
          shown: part.text,
          chars: 0,
          keepBlocks: !calling.has(i),
        });
      }
    }
  }
  return out;
}

/** How the renderings are made. */
export interface RenderSettings {
  readonly digests: Digests;
  readonly diagnosticChars: number;
  /** Budget of a bounded view (code points). */
  readonly viewChars: number;
}

/**
 * The rendering of one slot for a reduction step, or undefined when that step does not apply to it
 * or would not make it smaller.
 */
export function renderingFor(
  s: RenderSettings,
  f: FitSlot,
  kind: Rendering['kind'],
  current: Rendering | undefined,
  keep?: (line: string) => boolean,
): Rendering | undefined {
  const toolName = f.kind === 'reasoning' ? 'assistant_reasoning' : (f.slot.toolName ?? 'tool');
  if ((kind === 'reasoning') !== (f.kind === 'reasoning')) return undefined;
  // Content-addressed: the id is the SHA-256 prefix the vault stores the text under.
  const artifactId = shortIdForSha(s.digests.of(f.evidence));
  const line = renderReceipt(createReceipt(artifactId, toolName, codePoints(f.evidence)));
  let text: string;
  if (kind === 'receipt') text = line;
  else if (kind === 'digest')
    text = renderDigest(f.shown, line, { diagnosticChars: s.diagnosticChars, args: f.slot.callArgs });
  else if (kind === 'view')
    text = `${compactLines(f.shown, { maxChars: s.viewChars, ...(keep === undefined ? {} : { keep }) })}\n${line}`;
  else {
    const size = f.keepBlocks === false ? codePoints(f.evidence) : proseChars(f.evidence);
    text = reasoningRendering(f.evidence, line, size, f.keepBlocks !== false);
  }
  const before = current?.text ?? f.evidence;
  if (codePoints(text) >= codePoints(before) || isReceipt(f.evidence)) return undefined;
  return { kind, text, evidence: f.evidence, artifactId, toolName };
}

/**
 * The least a window fit can leave of a request: the instruction prefix, the user-authored
 * messages and the newest turn, every other old item folded into block receipts (whose few lines
 * are left out here). Undefined when the request has no history.
 */
export function floorRequest<T extends Record<string, unknown>>(request: T, view: RequestView): T | undefined {
  const bounds = boundsOf(view);
  if (bounds === undefined || view.listKey === undefined) return undefined;
  // The fit keeps the newest turn and the turn of the agent's last round (src/window/blocks.ts).
  const lastAssistant = view.itemInfo.findLastIndex((i) => i.role === 'assistant');
  const lastRound = segmentSteps(view.itemInfo).starts.findLast((s) => s <= lastAssistant) ?? bounds.newest;
  const keepFrom = Math.min(bounds.newest, lastRound);
  const kept = view.items.filter((_, i) => i < bounds.start || i >= keepFrom || view.itemInfo[i]?.userText === true);
  return withItems(request, view.listKey, kept);
}

/** Lines of an output holding this many or fewer of its lines with a word are the word's own lines. */
export const NAMED_LINE_MAX = 5;

/**
 * The lines of an output a bounded view keeps first: those holding a word (src/compile/working-set.ts
 * `referenceWords`) the agent named after the output arrived, when few lines of the output hold it
 * (at most {@link NAMED_LINE_MAX}): the definition the agent went on to talk about, not every line
 * with `self` in it. Decided from the past only.
 */
export function namedLines(text: string, named: ReadonlySet<string>): (line: string) => boolean {
  const count = new Map<string, number>();
  const wordsOf = new Map<string, Set<string>>();
  for (const l of text.split('\n')) {
    const words = referenceWords(l);
    wordsOf.set(l, words);
    for (const w of words) if (named.has(w)) count.set(w, (count.get(w) ?? 0) + 1);
  }
  const own = new Set([...count].flatMap(([w, n]) => (n <= NAMED_LINE_MAX ? [w] : [])));
  return (line) => [...(wordsOf.get(line) ?? referenceWords(line))].some((w) => own.has(w));
}
