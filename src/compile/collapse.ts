/**
 * Lossless turn collapse: the items of old steps are replaced by one note that names, per block,
 * the vaulted artifact holding those exact items (canonical JSON). The note rides in a user
 * message so roles stay valid in every format: merged into the first retained user message, or
 * — when the retained part starts with an assistant item — in a user message of its own that
 * also carries the latest collapsed user text (the task stays visible).
 */
import type { RequestFormat } from '../step.js';
import type { ItemInfo } from '../model/types.js';
import { RECOVERY_HINT } from '../receipts/index.js';

type Obj = Readonly<Record<string, unknown>>;

/** One note line per collapsed block (always contains "Token Terminator" and the artifact id). */
export function collapseNoteLine(firstStep: number, lastStep: number, itemCount: number, artifactId: string, chars: number): string {
  return `[Token Terminator collapsed steps ${firstStep}-${lastStep} (${itemCount} items) | artifact=${artifactId} | chars=${chars} | ${RECOVERY_HINT}]`;
}

const textPartType = (format: RequestFormat): string => (format === 'responses' ? 'input_text' : 'text');

/** A user item with the note in front of its content (multimodal parts kept, in order). */
export function prefixNote(format: RequestFormat, item: unknown, note: string): unknown {
  const obj = item as Obj;
  const content = obj['content'];
  if (typeof content === 'string') return { ...obj, content: content === '' ? note : `${note}\n\n${content}` };
  if (Array.isArray(content)) return { ...obj, content: [{ type: textPartType(format), text: note }, ...content] };
  return { ...obj, content: note };
}

export interface CollapseInput {
  readonly format: RequestFormat;
  readonly items: readonly unknown[];
  readonly info: readonly ItemInfo[];
  /** First item after the system/developer head. */
  readonly headEnd: number;
  /** First retained item (a step start). */
  readonly cut: number;
  /** The note text (one line per collapsed block). */
  readonly note: string;
}

/** The new conversation list: head, the note (merged or standalone), then the retained items. */
export function collapseItems(input: CollapseInput): unknown[] {
  const { format, items, info, headEnd, cut, note } = input;
  const head = items.slice(0, headEnd);
  const rest = items.slice(cut);
  if (info[cut]?.userText === true) return [...head, prefixNote(format, items[cut], note), ...rest.slice(1)];
  let task: number | undefined;
  for (let i = cut - 1; i >= headEnd; i--) {
    if (info[i]!.userText) {
      task = i;
      break;
    }
  }
  const noteItem = task === undefined ? { role: 'user', content: note } : prefixNote(format, items[task], note);
  return [...head, noteItem, ...rest];
}
