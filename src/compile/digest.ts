/**
 * The digest an old tool output becomes in a history rewrite: what the agent needs to keep its
 * thread (did it fail, how big was it, what did it start with, which lines said what went wrong)
 * plus the receipt that recovers the exact output. Deterministic: the same output always digests
 * to the same text, so a digested item renders byte-identically in every later request.
 *
 * ```
 * [Token Terminator digest | 120 lines | exit 1]
 * <first line of the output>
 * <failure lines, in order, up to the budget>
 * [Token Terminator artifact a_… | tool=… | chars=5234 | recover with token_terminator action=artifact_get]
 * ```
 * The receipt names the size; its id is the content's SHA-256 prefix, so no separate digest field.
 */
import { codePoints } from '../measure/index.js';

const CLIP = 160;

/**
 * Lines that say something went wrong. This list belongs to the digest (a small budget of the most
 * telling lines); the faithful first views of failing outputs are the compactors' job.
 */
const FAILURE =
  /^E {2,}\S|^\S+:\d+: (?:[\w$]+\.)*[\w$]*(?:Error|Exception)\b|^(?:FAILED|ERROR|FAIL)\b|^Traceback \(most recent call last\)|^(?:[\w$]+\.)*[A-Z][\w$]*(?:Error|Exception)\b(?::|$)|^Caused by: |\b(?:error|fatal)(?:\[\w+\])?:|\berror TS\d+|^npm ERR!|^npm error\b|^panic: |panicked at|^--- FAIL|^\[ERROR\]|BUILD FAILURE|: command not found$|No such file or directory$|\b[1-9]\d* (?:failed|errors?)\b|\bexit(?:ed with)? (?:code|status)[ :=]+[1-9]/;
/** Numbered source lines of an editor view (`123:    code`) are never failure lines. */
const SOURCE_LINE = /^\s*\d+[:|]/;

/** ESLint's stylish format (`  12:5  error  'x' is not defined  no-undef`) and Go's `file.go:12:2: msg`. */
const LINT_LINE = /^\s*\d+:\d+\s+error\s+\S|^\S+\.go:\d+:\d+: \S/;

/** True when a line reads as a failure (the digest's own classifier). */
export function isFailureLine(line: string): boolean {
  const t = line.trim();
  if (t === '' || t.length > 4000) return false;
  if (LINT_LINE.test(line)) return true;
  return !SOURCE_LINE.test(line) && FAILURE.test(t);
}

const EXIT = [
  /<returncode>(-?\d+)<\/returncode>/,
  /^\[exit code: (-?\d+)\]/m,
  /\bexit(?:ed with)? (?:code|status)[ :=]+(-?\d+)/i,
  /\bReturn code: (-?\d+)/i,
];

/** The exit status an output reports about itself, if it does. */
export function exitStatusOf(text: string): number | undefined {
  for (const re of EXIT) {
    const m = re.exec(text.length > 20_000 ? `${text.slice(0, 10_000)}\n${text.slice(-10_000)}` : text);
    if (m !== null) return Number(m[1]);
  }
  return undefined;
}

function clip(line: string, max = CLIP): string {
  const points = Array.from(line);
  return points.length <= max ? line : `${points.slice(0, max - 1).join('')}\u2026`;
}

export interface DigestOptions {
  /** Budget of the failure lines in code points (0 = none). */
  readonly diagnosticChars: number;
  /** `text` is already a reduced view of the output (its line count is not the output's). Default false. */
  readonly view?: boolean;
}

/** The digest of `text` ending in `receipt` (a rendered receipt line). */
export function renderDigest(text: string, receipt: string, options: DigestOptions): string {
  const lines = text.split('\n');
  const exit = exitStatusOf(text);
  const first = lines.find((l) => l.trim() !== '') ?? '';
  const facts = [
    ...(options.view === true ? [] : [`${lines.length} lines`]),
    ...(exit === undefined ? [] : [`exit ${exit}`]),
  ];
  const header = `[Token Terminator digest${facts.map((f) => ` | ${f}`).join('')}]`;
  const out = [header];
  if (first !== '') out.push(clip(first.trimEnd()));
  let budget = options.diagnosticChars;
  const seen = new Set<string>([first.trim()]);
  for (const line of lines) {
    if (budget <= 0) break;
    if (!isFailureLine(line)) continue;
    const t = clip(line.trim());
    if (exit !== undefined && t.length < 60 && EXIT.some((re) => re.test(t))) continue; // the header says it
    if (seen.has(t)) continue;
    seen.add(t);
    if (codePoints(t) > budget) break;
    out.push(t);
    budget -= codePoints(t) + 1;
  }
  out.push(receipt);
  return out.join('\n');
}
