/**
 * The fidelity figures of `replay` (task, actions, diagnostics, grounding), defined in
 * docs/fidelity.md "How it is checked" and measured on each replayed request against the final
 * request as the model gets it. "Present": verbatim in one of the final request's strings. Tool
 * outputs are `tool` messages and, for text-protocol sessions, the user messages after the first
 * assistant message that the observation pattern recognises; diagnostic lines are replay's ruler's
 * (src/measure/diagnostic-ruler.ts).
 */
import { chatActions } from '../compile/actions.js';
import type { ObservationTest } from '../compile/observations.js';
import { stringsOf } from '../measure/canonical-json.js';
import { diagnosticLines } from '../measure/diagnostic-ruler.js';

type Obj = Readonly<Record<string, unknown>>;

/** Tool outputs at least this long have their diagnostic lines checked. */
export const DIAGNOSTIC_MIN_CHARS = 4000;
/** Tool outputs at least this long have their grounding strings checked. */
export const GROUNDING_MIN_CHARS = 1000;
/** How many of the agent's next actions a tool output grounds. */
export const GROUNDING_ACTIONS = 3;

/** Counts behind the percentages (per session and in total). */
export interface FidelityCounts {
  requests: number;
  tasks_visible: number;
  actions_checked: number;
  actions_visible: number;
  diagnostic_lines: number;
  diagnostic_lines_visible: number;
  grounding_strings: number;
  grounding_strings_visible: number;
  /** Requests answered by an action (src/replay/sight.ts). */
  use_actions: number;
  /** Of those, actions with a used line the final request did not show. */
  use_actions_missing_line: number;
  /** Lines actions copied from earlier tool outputs, and how many of them the final request showed. */
  use_lines: number;
  use_lines_visible: number;
  /** Words actions copied from earlier tool outputs, and how many of them the final request showed. */
  use_words: number;
  use_words_visible: number;
  /** Actions with any used item not shown: each would have needed a recovery round trip. */
  simulated_recoveries: number;
}

export const emptyCounts = (): FidelityCounts => ({
  requests: 0,
  tasks_visible: 0,
  actions_checked: 0,
  actions_visible: 0,
  diagnostic_lines: 0,
  diagnostic_lines_visible: 0,
  grounding_strings: 0,
  grounding_strings_visible: 0,
  use_actions: 0,
  use_actions_missing_line: 0,
  use_lines: 0,
  use_lines_visible: 0,
  use_words: 0,
  use_words_visible: 0,
  simulated_recoveries: 0,
});

export function addCounts(into: FidelityCounts, more: FidelityCounts): void {
  for (const k of Object.keys(into) as (keyof FidelityCounts)[]) into[k] += more[k];
}

/**
 * The values of an action: a JSON arguments string decoded (its strings, and its numbers when
 * `numbers`), else the string itself. A JSON arguments string contributes its values, not its keys
 * (the keys are the tool's schema).
 */
export function actionValues(action: string, numbers = false): string[] {
  try {
    const parsed: unknown = JSON.parse(action);
    if (typeof parsed === 'object' && parsed !== null) return stringsOf(parsed, [], numbers);
  } catch {
    // not JSON: the action is its own value
  }
  return [action];
}

/** Identifiers and paths of ≥ 4 chars (with a letter) and numbers of ≥ 2 digits, in order, distinct. */
export function groundingStrings(action: string): string[] {
  const out = new Set<string>();
  for (const v of actionValues(action, true)) {
    for (const piece of v.match(/[\p{L}\p{N}_./-]+/gu) ?? []) {
      const s = piece.replace(/^[./-]+|[./-]+$/g, '');
      if (/^\d+$/.test(s)) {
        if (s.length >= 2) out.add(s);
      } else if (/\p{L}/u.test(s) && [...s].length >= 4) out.add(s);
    }
  }
  return [...out];
}

const SEP = '\u0000';

/** The texts of a message content: the string, or its text parts. */
export function contentTexts(content: unknown): string[] {
  if (typeof content === 'string') return [content];
  if (!Array.isArray(content)) return [];
  return content.flatMap((p) =>
    typeof p === 'object' && p !== null && typeof (p as Obj)['text'] === 'string' ? [(p as Obj)['text'] as string] : [],
  );
}

/** One session's fidelity, fed request by request in order. */
export class FidelityTracker {
  readonly #messages: readonly Obj[];
  readonly #prefixEnd: number;
  readonly #outputs: ReadonlySet<number>;
  /** Earlier-conversation text up to (excluding) message j, grown lazily. */
  #earlier = '';
  #earlierUpTo = 0;
  #previousEnd = 0;
  readonly counts: FidelityCounts = emptyCounts();

  constructor(messages: readonly Obj[], isObservation: ObservationTest) {
    this.#messages = messages;
    const first = messages.findIndex((m) => m['role'] === 'assistant');
    this.#prefixEnd = first === -1 ? messages.length : first;
    const outputs = new Set<number>();
    messages.forEach((m, j) => {
      if (m['role'] === 'tool') outputs.add(j);
      else if (
        m['role'] === 'user' &&
        j > this.#prefixEnd &&
        isObservation(contentTexts(m['content']).join('\n'), m, j)
      )
        outputs.add(j);
    });
    this.#outputs = outputs;
  }

  /** Whether message `j` is a tool output (a `tool` message or a recognised observation). */
  isOutput(j: number): boolean {
    return this.#outputs.has(j);
  }

  /** Measure the request made at message `end` (raw messages [0, end)) against its final messages. */
  request(end: number, finalMessages: readonly unknown[]): void {
    const c = this.counts;
    const final = stringsOf(finalMessages).join(SEP);
    const has = (s: string): boolean => final.includes(s);
    c.requests++;
    const prefixEnd = Math.min(this.#prefixEnd, end);
    let task = true;
    for (let j = 0; j < prefixEnd && task; j++)
      for (const t of contentTexts(this.#messages[j]!['content'])) if (!has(t)) task = false;
    if (task) c.tasks_visible++;
    for (let j = 0; j < end; j++) {
      const m = this.#messages[j]!;
      if (m['role'] !== 'assistant') continue;
      for (const a of chatActions(m)) {
        c.actions_checked++;
        if (has(a)) c.actions_visible++;
      }
    }
    for (let j = this.#previousEnd; j < end; j++) {
      if (!this.#outputs.has(j)) continue;
      const text = contentTexts(this.#messages[j]!['content']).join('\n');
      if (text.length >= DIAGNOSTIC_MIN_CHARS) {
        for (const line of diagnosticLines(text)) {
          c.diagnostic_lines++;
          if (has(line)) c.diagnostic_lines_visible++;
        }
      }
      if (text.length >= GROUNDING_MIN_CHARS) {
        const earlier = this.#earlierText(j);
        for (const s of this.#nextActions(j).flatMap(groundingStrings)) {
          if (!text.includes(s) || earlier.includes(s)) continue;
          c.grounding_strings++;
          if (has(s)) c.grounding_strings_visible++;
        }
      }
    }
    this.#previousEnd = end;
  }

  /** The first GROUNDING_ACTIONS action strings after message j. */
  #nextActions(j: number): string[] {
    const out: string[] = [];
    for (let k = j + 1; k < this.#messages.length && out.length < GROUNDING_ACTIONS; k++) {
      const m = this.#messages[k]!;
      if (m['role'] === 'assistant') out.push(...chatActions(m));
    }
    return out.slice(0, GROUNDING_ACTIONS);
  }

  #earlierText(j: number): string {
    while (this.#earlierUpTo < j) {
      this.#earlier += SEP + stringsOf(this.#messages[this.#earlierUpTo]).join(SEP);
      this.#earlierUpTo++;
    }
    // Messages are consumed in order, so j never moves backwards within a session.
    return this.#earlier;
  }
}

/** Percentage with 2 decimals; 100 when nothing was checked (nothing could be missing). */
export function pct(part: number, whole: number): number {
  return whole === 0 ? 100 : Math.round((part / whole) * 10000) / 100;
}
