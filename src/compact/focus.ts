/**
 * Focus lines: when a view of a large output has to leave lines out, the lines that mention the
 * names this conversation is about (the task's identifiers and paths, the ones the agent's recent
 * messages and commands used) survive verbatim, up to a small budget. An agent that lists 1,000
 * files looking for the class its task names finds that class's path in the view, not only in the
 * vault. Pure functions: the same output, view and terms always give the same lines.
 */

/** The marker before the focus lines of a view. */
export const FOCUS_MARKER = '[lines of the full output that mention names from this conversation, left out above]';

/**
 * Outputs longer than this get no focus lines: each term is one scan of the output, and beyond
 * this size (a `find /` of the whole disk) the scans would cost more than the view is worth.
 */
export const FOCUS_SCAN_CHARS = 400_000;

export interface FocusBudget {
  /** At most this many lines. Default 30. */
  readonly maxLines?: number;
  /** At most this many code units in all. Default 3000. */
  readonly maxChars?: number;
}

const IDENT = /[A-Za-z_$][\w$]*(?:[./-][\w$]+)*/g;
const BACKTICKED = /`([^`\n]{4,80})`/g;
/** Shapes that name something (a mixed-case or snake_case identifier, a dotted name, a path, a name with digits). */
const NAMELIKE = /[a-z][A-Z]|[A-Z][a-z]+[A-Z]|_|[./]|[A-Za-z]\d|\d[A-Za-z]/;
const HUMPS = /[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+/g;

/**
 * The names in one token: the token, the parts of a path or dotted name, and for a CamelCase
 * name every run of at least two of its words (`BeanDeserializerFactory` also names
 * `BeanDeserializer` and `DeserializerFactory`: an agent looking at the factory finds its tests).
 */
function namesIn(token: string): string[] {
  const out = [token];
  const parts = token.split(/[./-]/).filter((p) => p !== '');
  if (parts.length > 1) out.push(...parts.filter((p) => NAMELIKE.test(p)));
  for (const part of parts) {
    const humps = part.match(HUMPS) ?? [];
    if (humps.length < 3 || !/[a-z][A-Z]|[A-Z][a-z]+[A-Z]/.test(part)) continue;
    for (let a = 0; a < humps.length; a++)
      for (let b = a + 2; b <= humps.length; b++) if (b - a < humps.length) out.push(humps.slice(a, b).join(''));
  }
  return out;
}

/**
 * The names in some texts, most recent text last: identifiers of a telling shape (`AtomicReference`,
 * `parse_config`, `src/app/loader.py`, `io.Reader`) with their parts, and anything quoted in
 * backticks; each at least 5 chars; the last `max` distinct ones, later texts winning.
 */
export function focusTerms(texts: readonly string[], max = 400): string[] {
  const order = new Map<string, number>();
  let n = 0;
  const add = (term: string): void => {
    const t = term.replace(/^[./-]+|[./-]+$/g, '');
    if (t.length < 5 || t.length > 200) return;
    order.delete(t);
    order.set(t, n++);
  };
  for (const text of texts) {
    for (const m of text.matchAll(IDENT)) if (NAMELIKE.test(m[0])) for (const name of namesIn(m[0])) add(name);
    for (const m of text.matchAll(BACKTICKED)) if (!/\s/.test(m[1]!)) add(m[1]!);
  }
  return [...order.keys()].slice(-max);
}

/**
 * Lines of `output` that mention a term and are not lines of `view`, in output order, within the
 * budget. A term found on more than an eighth of the lines (and more than 8) tells nothing and is
 * ignored; so are lines longer than 400 chars, and outputs longer than FOCUS_SCAN_CHARS. Each term is looked up with `indexOf` and counting
 * stops as soon as a term proves too common, so the work stays near one pass per useful term.
 */
export function focusLines(output: string, view: string, terms: readonly string[], budget: FocusBudget = {}): string[] {
  if (terms.length === 0 || output.length === 0 || output.length > FOCUS_SCAN_CHARS) return [];
  const maxLines = budget.maxLines ?? 30;
  const maxChars = budget.maxChars ?? 3000;
  const starts = [0];
  for (let i = output.indexOf('\n'); i !== -1; i = output.indexOf('\n', i + 1)) starts.push(i + 1);
  const limit = Math.max(8, Math.floor(starts.length / 8));
  const lineOf = (at: number): number => {
    let lo = 0;
    let hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (starts[mid]! <= at) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  };
  const chosen = new Set<number>();
  for (const term of new Set(terms)) {
    const found: number[] = [];
    for (
      let at = output.indexOf(term);
      at !== -1 && found.length <= limit;
      at = output.indexOf(term, at + term.length)
    ) {
      const line = lineOf(at);
      if (found.at(-1) !== line) found.push(line);
      at = (starts[line + 1] ?? output.length) - term.length; // next line
    }
    if (found.length <= limit) for (const line of found) chosen.add(line);
  }
  if (chosen.size === 0) return [];
  const shown = new Set(view.split('\n'));
  const out: string[] = [];
  const taken = new Set<string>();
  let chars = 0;
  for (const index of [...chosen].sort((a, b) => a - b)) {
    if (out.length >= maxLines) break;
    const end = starts[index + 1] === undefined ? output.length : starts[index + 1]! - 1;
    const line = output.slice(starts[index]!, end).replace(/\s+$/, '');
    if (line.trim() === '' || line.length > 400 || shown.has(line) || taken.has(line)) continue;
    if (chars + line.length + 1 > maxChars) break;
    taken.add(line);
    out.push(line);
    chars += line.length + 1;
  }
  return out;
}

/** `view` followed by the focus lines it lacks (unchanged when there are none). */
export function withFocusLines(view: string, output: string, terms: readonly string[], budget?: FocusBudget): string {
  const lines = focusLines(output, view, terms, budget);
  return lines.length === 0 ? view : `${view}\n${FOCUS_MARKER}\n${lines.join('\n')}`;
}
