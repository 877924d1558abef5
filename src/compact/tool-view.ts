/**
 * The view `compressToolResult` shows for one tool result: terminal outputs through the
 * per-family compactors, native results (search_files, process, read_file) through the grep view,
 * the reference-compatible head/tail cut or the line mode. Every path is faithful on red: when
 * the text shows a failure, the diagnostic lines that fit their budget are in the view verbatim.
 */
import { detectFamily } from '../tools/family.js';
import { compactLines, compactText } from './compact-text.js';
import { scanDiagnostics } from './diagnostic-lines.js';
import { choosePinned } from './faithful.js';
import { compactGrep } from './grep.js';
import { compactTerminal, EVIDENCE_FAMILIES } from './index.js';
import { excerptLargeOutput, LARGE_OUTPUT_CHARS, WINDOW_CHARS } from './large-output.js';
import { codePoints } from '../measure/canonical-json.js';
import { splitLines, stripAnsi } from './lines.js';
import { compactListing } from './listing.js';
import { compactSearchHits, type OutputShape } from './shapes.js';
import { yieldSlice } from './slices.js';

export interface ViewInput {
  readonly output: string;
  readonly command?: string;
  readonly exitCode?: number;
  /**
   * The output's shape when it decided the view (src/compact/shapes.ts); `file_read` is a file's
   * content over the read threshold, numbered or not.
   */
  readonly shape?: OutputShape | 'file_read';
  /** What a search asked for: its match lines are the rows that hold one of these. */
  readonly terms?: readonly string[];
}

export interface ViewOptions {
  /** Canonical tool name: `terminal`, `search_files`, `process` or `read_file`. */
  readonly tool: string;
  readonly terminalMaxChars: number;
  readonly nativeMaxChars: number;
  readonly diagnosticChars: number;
  readonly strategy: 'auto' | 'reference' | 'lines';
}

/** The compact view of `input` (may not be smaller: the caller checks). */
export function renderToolView(input: ViewInput, o: ViewOptions): string {
  const shaped = input.shape === undefined ? undefined : renderShape(input, o);
  if (shaped !== undefined) return shaped;
  if (o.tool === 'terminal') {
    return compactTerminal(input, { maxChars: o.terminalMaxChars, diagnosticChars: o.diagnosticChars }).text;
  }
  const text = input.output;
  if (o.tool === 'search_files' && o.strategy !== 'reference') {
    const grep = compactGrep(text, { maxChars: o.nativeMaxChars });
    if (grep !== undefined) return grep;
  }
  const lines = o.strategy === 'reference' ? undefined : lineView(text, o, input.exitCode);
  if (o.strategy === 'lines') return lines!;
  const reference = compactText(text, o.nativeMaxChars);
  const missing = missingDiagnostics(text, reference, o.diagnosticChars, input.exitCode);
  if (o.strategy === 'reference') return withMissing(reference, missing);
  if (missing.length > 0) return lines!;
  return codePoints(lines!) < codePoints(reference) ? lines! : reference;
}

/**
 * {@link renderToolView} for outputs of any size, in slices. Beyond {@link LARGE_OUTPUT_CHARS} the
 * evidence views (grep, git, listings: one pass, exact counts) and the reference cut still read
 * the whole text; the views of runs (test runners, builds, logs) are made from the bounded
 * excerpt of src/compact/large-output.ts and say so in their first line.
 */
export async function renderToolViewInSlices(input: ViewInput, o: ViewOptions, signal?: AbortSignal): Promise<string> {
  const text = input.output;
  if (text.length <= LARGE_OUTPUT_CHARS) return renderToolView(input, o);
  await yieldSlice(signal);
  if (input.shape === 'search_hits' || input.shape === 'listing') return renderToolView(input, o);
  if (o.tool === 'terminal' && EVIDENCE_FAMILIES.has(detectFamily(input.command, text)))
    return renderToolView(input, o);
  if (o.tool === 'search_files' && o.strategy !== 'reference') {
    const grep = compactGrep(text, { maxChars: o.nativeMaxChars });
    if (grep !== undefined) return grep;
    await yieldSlice(signal);
  }
  const excerpt = await excerptLargeOutput(text, signal === undefined ? {} : { signal });
  if (o.tool !== 'terminal' && o.strategy === 'reference') {
    const reference = compactText(text, o.nativeMaxChars);
    return withMissing(reference, missingDiagnostics(excerpt.text, reference, o.diagnosticChars, input.exitCode));
  }
  const head = `[Token Terminator: view of a ${codePoints(text).toLocaleString('en-US')}-char output made from its first and last ${WINDOW_CHARS.toLocaleString('en-US')} chars and the diagnostic lines between them; counts below cover those parts]`;
  return `${head}\n${renderToolView({ ...input, output: excerpt.text }, o)}`;
}

/** The view a shape deserves; undefined when its compactor finds nothing to do (the tool's view follows). */
function renderShape(input: ViewInput, o: ViewOptions): string | undefined {
  const text = input.output;
  if (input.shape === 'search_hits') return compactSearchHits(text, input.terms);
  if (input.shape === 'listing') return compactListing(text);
  if (input.shape === undefined) return undefined;
  // A read (`numbered_read`, `file_read`).
  const lines = splitLines(text);
  const numbers = lines.map((l) => /^\s*(\d+)(?:[:|]|\t|\s?→)/.exec(l)?.[1]).filter((n) => n !== undefined);
  const range = numbers.length * 2 >= lines.length ? `, lines ${numbers[0]}-${numbers.at(-1)}` : '';
  const head = `[file read: ${lines.length.toLocaleString('en-US')} lines${range}, ${codePoints(text).toLocaleString('en-US')} chars; shown: its first and last lines, failure lines and the lines the conversation names]`;
  return `${head}\n${lineView(text, o, input.exitCode)}`;
}

/** The line mode of a native result at its size target. */
function lineView(text: string, o: ViewOptions, exitCode: number | undefined): string {
  const exit = exitCode === undefined ? {} : { exitCode };
  return compactLines(text, { maxChars: o.nativeMaxChars, diagnosticChars: o.diagnosticChars, ...exit });
}

/** The reference cut stays byte-identical; what it dropped of a failure follows it. */
function withMissing(reference: string, missing: readonly string[]): string {
  return missing.length === 0
    ? reference
    : `${reference}\n[diagnostic lines the cut above leaves out]\n${missing.join('\n')}`;
}

/** The diagnostic lines (within budget; none when it is 0) of a failing `text` that are not lines of `view`. */
function missingDiagnostics(text: string, view: string, budget: number, exitCode?: number): string[] {
  if (budget <= 0) return [];
  const lines = splitLines(stripAnsi(text));
  const scan = scanDiagnostics(lines, exitCode === undefined ? {} : { exitCode });
  if (!scan.failing || scan.lines.length === 0) return [];
  const shown = new Set(splitLines(view));
  return [...choosePinned(lines, scan.lines, budget).chosen]
    .sort((a, b) => a - b)
    .map((i) => lines[i]!)
    .filter((l) => !shown.has(l));
}
