/**
 * The digest an old tool output becomes in a history rewrite (its format: docs/fidelity.md, "What
 * may change, and how"): what the agent needs to keep its thread (did it fail, which tests, how big
 * was it, what does the artifact hold, which lines said what went wrong) plus the receipt that
 * recovers the exact output. Deterministic: the same output always digests to the same text, so a
 * digested item renders byte-identically in every later request.
 */
import { codePoints } from '../measure/index.js';
import { parseArgs } from '../model/read.js';
import { isFailureLine, NUMBERED_LINE as NUMBERED, scanDiagnostics } from '../compact/diagnostic-lines.js';
import { FAILING_IDS } from '../runners/index.js';

const CLIP = 160;

/**
 * Most failing-test and diagnostic lines a digest keeps whatever their size (failing test ids
 * first, then the other diagnostic lines in order); beyond it the digest gives their count.
 */
export const DIGEST_MAX_DIAGNOSTICS = 50;

/**
 * The failing test ids of `lines`, with their line indices, in order (each line at most once): each
 * runner family's patterns (src/runners/), pytest's, Go's, cargo's, vitest/jest's, Gradle's, Maven's.
 */
export function failingTestIds(lines: readonly string[]): { readonly index: number; readonly id: string }[] {
  const out: { index: number; id: string }[] = [];
  for (let i = 0; i < lines.length; i += 1) {
    const line = lines[i]!;
    if (line.length > 4000) continue;
    for (const re of FAILING_IDS) {
      const m = re.exec(line);
      if (m === null) continue;
      out.push({ index: i, id: m[1]! });
      break;
    }
  }
  return out;
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

const PATH_KEYS = ['path', 'file_path', 'filePath', 'file', 'filename', 'target_file', 'absolute_path'];
const SYMBOL =
  /^\s*(?:export\s+)?(?:default\s+)?(?:pub(?:\([\w:]+\))?\s+)?(?:async\s+)?(?:def|class|function|interface|struct|enum|trait|impl|fn|func|type|module)\s+([A-Za-z_$][\w$]*)/;
const MAX_SYMBOLS = 8;

/** The path a tool call's arguments name, if any. */
function pathOf(args: unknown): string | undefined {
  const value = parseArgs(args);
  for (const key of PATH_KEYS) {
    const v = value[key];
    if (typeof v === 'string' && v !== '' && v.length <= 300 && !v.includes('\n')) return v;
  }
  return undefined;
}

/** What the artifact holds, for a recovery that asks for the right page: path, line range, symbols. */
function holdsLine(lines: readonly string[], args: unknown): string | undefined {
  const tagged = /^<path>([^<\n]{1,300})<\/path>/.exec(lines[0] ?? '');
  const path = pathOf(args) ?? tagged?.[1];
  let first: number | undefined;
  let last: number | undefined;
  let numbered = 0;
  const symbols: string[] = [];
  for (const line of lines) {
    const m = NUMBERED.exec(line);
    if (m !== null) {
      const n = Number(m[1]);
      first ??= n;
      last = n;
      numbered += 1;
    }
    const s = SYMBOL.exec(m === null ? line : line.slice(m[0].length));
    if (s !== null && !symbols.includes(s[1]!)) symbols.push(s[1]!);
  }
  const parts: string[] = [];
  if (path !== undefined) parts.push(path);
  // A numbered view (most lines carry a number): its range is the page a recovery asks for.
  if (first !== undefined && last !== undefined && numbered * 2 >= lines.length && last >= first)
    parts.push(`lines ${first}-${last}`);
  if (symbols.length > 0 && (path !== undefined || numbered * 2 >= lines.length))
    parts.push(
      `defs: ${symbols.slice(0, MAX_SYMBOLS).join(', ')}${symbols.length > MAX_SYMBOLS ? ` (+${symbols.length - MAX_SYMBOLS})` : ''}`,
    );
  return parts.length === 0 ? undefined : `[holds: ${parts.join(' | ')}]`;
}

export interface DigestOptions {
  /**
   * Budget in code points for the context lines kept after the failing-test and diagnostic lines
   * (which are kept up to {@link DIGEST_MAX_DIAGNOSTICS} whatever their size); 0 = no failure
   * lines at all.
   */
  readonly diagnosticChars: number;
  /** `text` is already a reduced view of the output (its line count is not the output's). Default false. */
  readonly view?: boolean;
  /** The arguments of the call that produced the output (its path is named). Default none. */
  readonly args?: unknown;
}

/** The digest of `text` ending in `receipt` (a rendered receipt line). */
export function renderDigest(text: string, receipt: string, options: DigestOptions): string {
  const lines = text.split('\n');
  const exit = exitStatusOf(text);
  const firstIndex = lines.findIndex((l) => l.trim() !== '');
  const first = firstIndex < 0 ? '' : lines[firstIndex]!;
  const ids = failingTestIds(lines);
  const facts = [
    ...(options.view === true ? [] : [`${lines.length} lines`]),
    ...(exit === undefined ? [] : [`exit ${exit}`]),
    ...(ids.length === 0 ? [] : [`${new Set(ids.map((x) => x.id)).size} failed`]),
  ];
  const header = `[Token Terminator digest${facts.map((f) => ` | ${f}`).join('')}]`;
  const out = [header];
  if (first !== '') out.push(clip(first.trimEnd()));
  const holds = holdsLine(lines, options.args);
  if (holds !== undefined) out.push(holds);
  if (options.diagnosticChars > 0) out.push(...diagnosticPart(lines, firstIndex, ids, exit, options.diagnosticChars));
  out.push(receipt);
  return out.join('\n');
}

/** The failing-test and diagnostic lines (ids first, up to the bound), then context lines within `budget`. */
function diagnosticPart(
  lines: readonly string[],
  firstIndex: number,
  ids: readonly { readonly index: number; readonly id: string }[],
  exit: number | undefined,
  budget: number,
): string[] {
  const seen = new Set<string>(firstIndex < 0 ? [] : [lines[firstIndex]!.trim()]);
  const rendered = new Map<number, string>();
  const idEnd = new Map<number, number>();
  for (const { index, id } of ids) idEnd.set(index, lines[index]!.trim().indexOf(id) + id.length);
  let over = 0;
  const take = (i: number): void => {
    if (i === firstIndex || rendered.has(i)) return;
    const t = clip(lines[i]!.trim(), Math.max(CLIP, (idEnd.get(i) ?? 0) + 1));
    if (seen.has(t)) return;
    if (exit !== undefined && t.length < 60 && EXIT.some((re) => re.test(t))) return; // the header says it
    seen.add(t);
    if (rendered.size >= DIGEST_MAX_DIAGNOSTICS) over += 1;
    else rendered.set(i, t);
  };
  for (const { index } of ids) take(index);
  for (let i = 0; i < lines.length; i += 1) if (isFailureLine(lines[i]!)) take(i);
  let left = budget;
  for (const t of rendered.values()) left -= codePoints(t) + 1;
  if (left > 0 && rendered.size > 0 && over === 0) {
    // What the budget has left goes to the lines that explain the failures (frames, pointed-at source).
    const scan = scanDiagnostics(lines.length > 20_000 ? [] : lines);
    for (const i of scan.lines) {
      if (rendered.has(i) || i === firstIndex) continue;
      const t = clip(lines[i]!.trimEnd());
      if (t.trim() === '' || seen.has(t.trim())) continue;
      if (exit !== undefined && t.length < 60 && EXIT.some((re) => re.test(t))) continue;
      if (codePoints(t) + 1 > left) break;
      seen.add(t.trim());
      rendered.set(i, t);
      left -= codePoints(t) + 1;
    }
  }
  const out = [...rendered.entries()].sort((a, b) => a[0] - b[0]).map(([, t]) => t);
  if (over > 0) out.push(`\u2026 ${over} more diagnostic line${over === 1 ? '' : 's'} (see the receipt) \u2026`);
  return out;
}
