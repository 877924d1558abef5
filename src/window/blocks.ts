/**
 * The last steps of the window fit (docs/window.md, the block steps): a block of consecutive old
 * turns, oldest first, becomes one assistant item carrying one receipt, whose artifact is the
 * block's items exactly as sent (JSON). The prefix, the user-authored messages (kept verbatim after
 * the receipt) and the newest turn are never touched.
 */
import { fencedSpans } from '../compile/actions.js';
import { segmentSteps } from '../compile/steps.js';
import type { Digests } from '../ledger/digests.js';
import { codePoints } from '../measure/index.js';
import { parseArgs } from '../model/index.js';
import type { RequestView } from '../model/types.js';
import { shortIdForSha } from '../vault/identity.js';
import type { Bounds } from './plan.js';

/** One old turn of a request: items [from, to). */
export interface Turn {
  readonly n: number;
  readonly from: number;
  readonly to: number;
  /** The turn acts through tool calls (its actions cannot stay without their outputs). */
  readonly calls: boolean;
}

/** How much of its turns' actions a block keeps in view, most first (docs/window.md, `block` to `block-summary`). */
export const BLOCK_MODES = ['text', 'calls', 'brief', 'summary'] as const;
export type BlockMode = (typeof BLOCK_MODES)[number];

/** Arguments longer than this many code points are shortened in a `brief` block. */
export const BRIEF_ARGS_CHARS = 160;

/** A block of turns rendered as one item. */
export interface Block {
  readonly from: number;
  readonly to: number;
  readonly mode: BlockMode;
  readonly item: unknown;
  /** The user-authored messages inside the block, sent verbatim after its receipt. */
  readonly users: readonly unknown[];
  /** The exact JSON of the block's items (vaulted). */
  readonly evidence: string;
  readonly artifactId: string;
}

/** What a session remembers of a block, by the key of its first item. */
export interface ChosenBlock extends Pick<Block, 'mode' | 'item' | 'artifactId'> {
  readonly count: number;
  readonly evidenceSha: string;
}

export const BLOCK_TOOL = 'turns';

/** The old turns a block may take: between the prefix and the newest turn, not started by a user. */
export function blockableTurns(view: RequestView, b: Bounds): (Turn | undefined)[] {
  const { starts } = segmentSteps(view.itemInfo);
  const calling = new Set(view.slots.filter((s) => s.kind === 'tool_call').map((s) => s.item));
  const out: (Turn | undefined)[] = [];
  // The newest turn, and the agent's last round before a new user message, stay.
  const last = Math.min(
    b.newest,
    view.itemInfo.findLastIndex((i) => i.role === 'assistant'),
  );
  starts.forEach((first, n) => {
    const from = Math.max(first, b.start);
    const to = starts[n + 1] ?? view.items.length;
    if (to > last || to <= from) return;
    const items = Array.from({ length: to - from }, (_, k) => from + k);
    const calls = items.some((i) => calling.has(i));
    const acts = items.some((i) => view.itemInfo[i]?.userText !== true);
    // A turn of user messages alone has nothing a block could take.
    out.push(acts ? { n: n + 1, from, to, calls } : undefined);
  });
  return out;
}

/** The user-authored messages of items [from, to): a block keeps them, verbatim and in order, after its receipt. */
export function usersIn(view: RequestView, from: number, to: number): unknown[] {
  return view.items.slice(from, to).filter((_, k) => view.itemInfo[from + k]?.userText === true);
}

/** The key a block is remembered by: its first item's exact JSON. */
export function itemKey(digests: Digests, item: unknown): string {
  return digests.of(JSON.stringify(item));
}

/** The block of `turns` (consecutive), rendered for the request's format. */
export function renderBlock(digests: Digests, view: RequestView, turns: readonly Turn[], mode: BlockMode): Block {
  const from = turns[0]!.from;
  const to = turns.at(-1)!.to;
  const items = view.items.slice(from, to);
  const evidence = JSON.stringify(items);
  const artifactId = shortIdForSha(digests.of(evidence));
  const commands: string[] = [];
  const files = new Set<string>();
  const kept: string[] = [];
  // `calls`: every call verbatim, one line each (JSON arguments hold no raw newline).
  const called: string[] = [];
  // An item that calls tools acts through its calls: its fenced blocks are prose.
  const callers = new Set(view.slots.filter((x) => x.kind === 'tool_call').map((x) => x.item));
  for (const slot of view.slots) {
    if (slot.item === undefined || slot.item < from || slot.item >= to) continue;
    if (slot.kind === 'tool_call') {
      const exact = argsText(slot.value);
      const args = parseArgs(exact);
      const shown = mode === 'brief' && codePoints(exact) > BRIEF_ARGS_CHARS ? oneLine(exact, BRIEF_ARGS_CHARS) : exact;
      if (mode === 'calls' || mode === 'brief') called.push(`called: ${slot.toolName ?? 'tool'} ${shown}`);
      const cmd = [args['command'], args['cmd']].find((c) => typeof c === 'string') as string | undefined;
      if (cmd !== undefined) pathsIn(cmd, files);
      if (mode === 'summary') commands.push(cmd ?? `${slot.toolName ?? 'tool'}(${Object.keys(args).join(',')})`);
      for (const k of ['path', 'file_path', 'filename', 'file'])
        if (typeof args[k] === 'string') files.add(args[k] as string);
    } else if (slot.kind === 'assistant' && !callers.has(slot.item)) {
      const text = assistantText(slot.value);
      for (const [a, b] of fencedSpans(text)) {
        const block = text.slice(a, b);
        if (mode === 'text') kept.push(block);
        else if (mode === 'calls') called.push(`ran: ${block.replace(/^```[^\n]*\n?|```\s*$/g, '').trim()}`);
        else commands.push(block.replace(/^```[^\n]*\n?|```\s*$/g, ''));
      }
    }
  }
  for (const c of commands) pathsIn(c, files);
  const ran = commands.map((c) => oneLine(c, 70));
  const shownRan = ran.length <= 8 ? ran : [...ran.slice(0, 6), `… ${ran.length - 7} more`, ran.at(-1)!];
  const shownFiles = [...files].slice(0, 8);
  const head = `[Token Terminator turns ${turns[0]!.n}–${turns.at(-1)!.n} (${to - from} items, ${codePoints(evidence)} chars JSON) | artifact ${artifactId} | recover with token_terminator action=artifact_get]`;
  const lines = [head, ...called];
  if (mode !== 'calls' && shownRan.length > 0) lines.push(`ran: ${shownRan.join(' ; ')}`);
  if (mode !== 'calls' && shownFiles.length > 0)
    lines.push(`files: ${shownFiles.join(', ')}${files.size > 8 ? ` (+${files.size - 8})` : ''}`);
  const text = [...lines, ...kept].join('\n');
  return {
    from,
    to,
    mode,
    item: assistantItem(view.format, text),
    users: usersIn(view, from, to),
    evidence,
    artifactId,
  };
}

/** The file paths a command names (with a directory and an extension). */
function pathsIn(command: string, into: Set<string>): void {
  for (const m of command.matchAll(/[\w./-]+\.\w{1,5}\b/g)) if (m[0].includes('/')) into.add(m[0]);
}

/** The exact arguments of a tool call as the model wrote them (Chat/Responses' string, Anthropic's input as JSON). */
function argsText(value: unknown): string {
  const v = value as { function?: { arguments?: unknown }; arguments?: unknown; input?: unknown } | undefined;
  const raw = v?.function?.arguments ?? v?.arguments ?? v?.input;
  return typeof raw === 'string' ? raw : (JSON.stringify(raw ?? {}) ?? '{}');
}

function oneLine(s: string, max: number): string {
  const line = s.replace(/\s+/g, ' ').trim();
  return codePoints(line) <= max ? line : `${[...line].slice(0, max - 1).join('')}…`;
}

function assistantText(value: unknown): string {
  const content = (value as { content?: unknown } | undefined)?.content;
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((p) => ((p as { text?: unknown }).text === undefined ? '' : String((p as { text?: unknown }).text)))
    .join('\n');
}

/** One assistant item with `text`, in the wire format of the request. */
function assistantItem(format: RequestView['format'], text: string): unknown {
  if (format === 'anthropic') return { role: 'assistant', content: [{ type: 'text', text }] };
  if (format === 'responses') return { type: 'message', role: 'assistant', content: [{ type: 'output_text', text }] };
  return { role: 'assistant', content: text };
}

/** The items with every block written in (blocks sorted, not overlapping). */
export function withBlocks(items: readonly unknown[], blocks: readonly Block[]): unknown[] {
  if (blocks.length === 0) return items as unknown[];
  const sorted = [...blocks].sort((a, b) => a.from - b.from);
  const out: unknown[] = [];
  let i = 0;
  for (const b of sorted) {
    out.push(...items.slice(i, b.from), b.item, ...b.users);
    i = b.to;
  }
  out.push(...items.slice(i));
  return out;
}
