/**
 * Sight at the moment of use: whether the agent could still see, in the request that produced an
 * action, what that action copies from earlier tool outputs (its *used items*), and the recovery
 * round trip the missing ones would have cost a live loop (billed by src/replay/figures.ts).
 * Defined exactly in docs/fidelity.md "How it is checked" (sight at use, `simulated_recoveries`).
 */
import { chatActions } from '../compile/actions.js';
import { codePoints, stringsOf } from '../measure/canonical-json.js';
import { actionValues, contentTexts, type FidelityCounts } from './fidelity.js';

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
  /** Earlier tool outputs (as recorded), oldest first. */
  readonly #outputs: string[] = [];
  /** Every other earlier message's strings, raw and decoded, joined. */
  #other = '';
  #upTo = 0;

  constructor(
    private readonly messages: readonly Obj[],
    private readonly isOutput: (j: number) => boolean,
    private readonly counts: FidelityCounts,
  ) {}

  /** Measure the request made at message `end` (its answer is message `end`) against its final messages. */
  request(end: number, finalMessages: readonly unknown[]): SightResult {
    this.#advance(end);
    const answer = this.messages[end];
    const actions = answer === undefined || answer['role'] !== 'assistant' ? [] : chatActions(answer);
    if (actions.length === 0) return { recoveryChars: undefined };
    const c = this.counts;
    c.use_actions++;
    const { words, lines } = useCandidates(actions.flatMap((a) => actionValues(a)));
    const used = (s: string): boolean => !this.#other.includes(s) && this.#outputs.some((o) => o.includes(s));
    const finalJson = JSON.stringify(finalMessages);
    const present = (s: string): boolean => finalJson.includes(JSON.stringify(s).slice(1, -1));
    const missing: string[] = [];
    for (const l of lines) {
      if (!used(l)) continue;
      c.use_lines++;
      if (present(l)) c.use_lines_visible++;
      else missing.push(l);
    }
    if (missing.length > 0) c.use_actions_missing_line++;
    for (const w of words) {
      if (!used(w)) continue;
      c.use_words++;
      if (present(w)) c.use_words_visible++;
      else missing.push(w);
    }
    if (missing.length === 0) return { recoveryChars: undefined };
    c.simulated_recoveries++;
    // The recovery reads the newest output holding a missing item, one page of it at most.
    const source = this.#outputs.findLast((o) => missing.some((s) => o.includes(s)));
    const page = source === undefined ? 0 : codePoints(source);
    return { recoveryChars: Math.min(RECOVERY_PAGE_CHARS, page) + RECOVERY_CALL_CHARS };
  }

  #advance(end: number): void {
    const other: string[] = [];
    for (; this.#upTo < end; this.#upTo++) {
      const m = this.messages[this.#upTo]!;
      if (this.isOutput(this.#upTo)) {
        this.#outputs.push(contentTexts(m['content']).join('\n'));
        continue;
      }
      other.push(...stringsOf(m));
      if (m['role'] === 'assistant') for (const a of chatActions(m)) other.push(...actionValues(a));
    }
    if (other.length > 0) this.#other += SEP + other.join(SEP);
  }
}
