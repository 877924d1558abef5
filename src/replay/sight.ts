/**
 * Sight at the moment of use (docs/fidelity.md): whether the agent could still see, in the request
 * that produced an action, what that action copies from earlier tool outputs; and the recovery
 * round trips the missing items would have cost a live loop. Defined exactly as follows.
 *
 * - The action of a replayed request is the recorded assistant message that answered it: each tool
 *   call's arguments decoded to their string values (a string that is not JSON counts as itself),
 *   or, for a message without tool calls, each fenced block's body.
 * - Its used items are words (`[A-Za-z_][A-Za-z0-9_./-]{3,}` or `\d{2,}`) and stripped lines of
 *   ≥ 20 chars of those strings (distinct per action) that occur in some earlier tool output of the
 *   conversation (as recorded) and in no other earlier message (instruction prefix, user messages,
 *   the agent's own texts and call arguments, raw and decoded).
 * - An item is present when its JSON-escaped form occurs in the JSON of the final request's
 *   messages. `use_lines_pct` / `use_words_pct`: present over used; `actions_missing_use_pct`:
 *   actions (requests answered by at least one action string) with a used line not present.
 * - A simulated recovery is an action with any used item not present: one round trip that reads
 *   the final request again from cache and adds min(8,000, chars of the most recent earlier tool
 *   output holding a missing item) + 200 chars of new input (billed by src/replay/figures.ts).
 */
import { chatActions } from '../compile/actions.js';
import { codePoints } from '../measure/index.js';
import { actionValues, contentTexts, stringsOf, type FidelityCounts } from './fidelity.js';

type Obj = Readonly<Record<string, unknown>>;

/** Stripped action lines at least this long are used lines. */
export const USE_LINE_MIN_CHARS = 20;
/** A simulated recovery reads at most this many chars of the artifact. */
export const RECOVERY_PAGE_CHARS = 8000;
/** New input of a simulated recovery besides the page (the call and its framing). */
export const RECOVERY_CALL_CHARS = 200;

const WORD = /[A-Za-z_][A-Za-z0-9_./-]{3,}|\d{2,}/g;
const SEP = '\u0000';

/** Candidate words and lines of an action's strings, distinct, in order. */
export function useCandidates(values: readonly string[]): { words: string[]; lines: string[] } {
  const words = new Set<string>();
  const lines = new Set<string>();
  for (const v of values) {
    for (const w of v.match(WORD) ?? []) words.add(w);
    for (const l of v.split('\n')) {
      const s = l.trim();
      if (s.length >= USE_LINE_MIN_CHARS) lines.add(s);
    }
  }
  return { words: [...words], lines: [...lines] };
}

/** What one request's sight measurement found. */
export interface SightResult {
  /** New input chars of the simulated recovery round trip (page + call); undefined: none needed. */
  readonly recoveryChars: number | undefined;
}

/** One session's sight at use, fed request by request in order (`end` grows). */
export class SightTracker {
  readonly #messages: readonly Obj[];
  readonly #isOutput: (j: number) => boolean;
  /** Earlier tool outputs (as recorded), oldest first. */
  readonly #outputs: string[] = [];
  /** Every other earlier message's strings, raw and decoded, joined. */
  #other = '';
  #upTo = 0;
  readonly #counts: FidelityCounts;

  constructor(messages: readonly Obj[], isOutput: (j: number) => boolean, counts: FidelityCounts) {
    this.#messages = messages;
    this.#isOutput = isOutput;
    this.#counts = counts;
  }

  /** Measure the request made at message `end` (its answer is message `end`) against its final messages. */
  request(end: number, finalMessages: readonly unknown[]): SightResult {
    this.#advance(end);
    const answer = this.#messages[end];
    const actions = answer === undefined || answer['role'] !== 'assistant' ? [] : chatActions(answer);
    if (actions.length === 0) return { recoveryChars: undefined };
    const c = this.#counts;
    c.use_actions++;
    const { words, lines } = useCandidates(actions.flatMap((a) => actionValues(a)));
    const used = (s: string): boolean => !this.#other.includes(s) && this.#outputs.some((o) => o.includes(s));
    const finalJson = JSON.stringify(finalMessages);
    const present = (s: string): boolean => finalJson.includes(JSON.stringify(s).slice(1, -1));
    const missing: string[] = [];
    let lineMissing = false;
    for (const l of lines) {
      if (!used(l)) continue;
      c.use_lines++;
      if (present(l)) c.use_lines_visible++;
      else {
        missing.push(l);
        lineMissing = true;
      }
    }
    for (const w of words) {
      if (!used(w)) continue;
      c.use_words++;
      if (present(w)) c.use_words_visible++;
      else missing.push(w);
    }
    if (lineMissing) c.use_actions_missing_line++;
    if (missing.length === 0) return { recoveryChars: undefined };
    c.simulated_recoveries++;
    let page = 0;
    for (let k = this.#outputs.length - 1; k >= 0; k--) {
      const o = this.#outputs[k]!;
      if (missing.some((s) => o.includes(s))) {
        page = codePoints(o);
        break;
      }
    }
    return { recoveryChars: Math.min(RECOVERY_PAGE_CHARS, page) + RECOVERY_CALL_CHARS };
  }

  #advance(end: number): void {
    const other: string[] = [];
    for (; this.#upTo < end; this.#upTo++) {
      const m = this.#messages[this.#upTo]!;
      if (this.#isOutput(this.#upTo)) {
        this.#outputs.push(contentTexts(m['content']).join('\n'));
        continue;
      }
      other.push(...stringsOf(m));
      if (m['role'] === 'assistant') for (const a of chatActions(m)) other.push(...actionValues(a));
    }
    if (other.length > 0) this.#other += SEP + other.join(SEP);
  }
}
