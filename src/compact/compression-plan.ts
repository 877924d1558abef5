/**
 * The rendering half of compressToolResult, and its options: what the stage would show for one
 * tool result before anything touches the vault. The tool-result stage's delta candidate must beat
 * exactly that view (operators/reduce-tool-result.ts).
 */
import { defaultInt } from '../config/index.js';
import type { ModeFlags } from '../config/index.js';
import type { Mode } from '../config/types.js';
import { strictlySmaller } from '../accept.js';
import { NOTED_FROM, type ItemMeasures } from '../ledger/item-measures.js';
import type { Digests } from '../ledger/digests.js';
import type { TokenCounter } from '../measure/types.js';
import { intOption, oneOfOption, requireVault } from '../options.js';
import { renderNativeNote } from '../receipts/index.js';
import type { Step, ToolResult } from '../step.js';
import { backendAllowed, backendOf, commandOf } from '../tools/command.js';
import { isFileRead } from '../tools/family.js';
import { resolveFlags } from '../tools/modes.js';
import { canonicalToolName, validateToolNames } from '../tools/names.js';
import type { ArtifactStore, LeaseStore } from '../vault/ports.js';
import { focusTerms, withFocusLines } from './focus.js';
import { DEFAULT_DIAGNOSTIC_CHARS } from './faithful.js';
import { readTerminalContent } from './index.js';
import { codePoints, stringsOf } from '../measure/canonical-json.js';
import { LONGEST_ARTIFACT_ID, type MemoCounter } from './receipt.js';
import { outputShape, searchTerms, unwrapText } from './shapes.js';
import { COUNT_SLICE_CHARS, countInSlices, recordInSlices } from './slices.js';
import { renderToolViewInSlices, type ViewInput } from './tool-view.js';

/** How every Token Terminator rendering of a tool result (receipt, delta, bounded view) begins. */
const RENDERING_MARK = '[Token Terminator';

/**
 * True when `content` already is a Token Terminator rendering (a temporal delta, a receipt, a
 * bounded view): no tool-result candidate reduces it again.
 */
export function isRendering(content: string): boolean {
  return content.startsWith(RENDERING_MARK);
}

/** Options of `compressToolResult`; only `vault` is required. */
export interface CompressToolResultOptions {
  /** Where exact originals go (required). */
  readonly vault: ArtifactStore & LeaseStore;
  /** Exact token counter: a replacement must also use fewer tokens. @defaultValue none (characters only) */
  readonly counter?: TokenCounter;
  /** Mode gate; ignored when `flags` is given. @defaultValue `'balanced'` */
  readonly mode?: Mode;
  /** Mode flags: `native` gates everything, `nativeReadFile` adds read_file. @defaultValue the flags of `mode` */
  readonly flags?: ModeFlags;
  /** search_files/process/read_file results shorter than this are untouched (≥ 1000). @defaultValue `12000` */
  readonly nativeMinChars?: number;
  /** Target size of native compact text (≥ 1000). @defaultValue `8000` (config `nativeMaxChars`) */
  readonly nativeMaxChars?: number;
  /** Terminal results shorter than this are untouched (≥ 1). @defaultValue `2000` */
  readonly terminalMinChars?: number;
  /** Target size of line-budgeted terminal renderings (≥ 200). @defaultValue `4000` */
  readonly terminalMaxChars?: number;
  /**
   * 'auto' keeps the smaller of the reference and line modes (the line mode when the reference cut
   * would drop a diagnostic line); or force one. @defaultValue `'auto'`
   */
  readonly nativeStrategy?: 'auto' | 'reference' | 'lines';
  /**
   * Budget, in code points, for the diagnostic lines of a failing output (and the match lines of a
   * search), kept verbatim on top of the size targets (≥ 0; 0 turns it off). @defaultValue `8000`
   */
  readonly diagnosticChars?: number;
  /**
   * Longer results cannot be vaulted: they get a bounded view saying so, built without compacting or
   * tokenizing the whole. @defaultValue `2_000_000` (config `maxArtifactChars`)
   */
  readonly maxArtifactChars?: number;
  /** Terminal backends allowed, compared case-insensitively (`all` allows every one). @defaultValue `['local']` */
  readonly backends?: readonly string[];
  /** Host tool name → canonical name (search_files, process, read_file, terminal). @defaultValue none */
  readonly toolNames?: Readonly<Record<string, string>>;
  /** Environment read for TERMINAL_ENV/TERMINAL_BACKEND. @defaultValue `process.env` */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /**
   * The names the conversation is about (its task, the agent's recent messages): a view that leaves
   * lines out keeps the output's lines that mention one of them or a name in the call's arguments
   * (src/compact/focus.ts). @defaultValue none (only the call's arguments)
   */
  readonly focus?: (step: Step<ToolResult>) => readonly string[] | Promise<readonly string[]>;
  /**
   * The request stages' measurement memo, counting with this very `counter`: the pieces counted
   * here are handed to it, so the request carrying the output does not tokenize it again.
   * @defaultValue none (the output is tokenized again as part of its request)
   */
  readonly measures?: Pick<ItemMeasures, 'counter' | 'notePieces'>;
  /**
   * The item ledger (the runtime's) the exact text's digest comes from: a text the session already
   * hashed is not hashed again for its put. @defaultValue none (the put hashes the text)
   */
  readonly digests?: Digests;
}

/**
 * What `compressToolResult` would do with one result before anything touches the vault:
 * nothing (not eligible), a bounded view (over the artifact ceiling), a skip (the view with its
 * note cannot be smaller), or a compact view to deliver with a note naming the vaulted original.
 */
export type CompressionPlan =
  | { readonly kind: 'over_ceiling'; readonly input: ViewInput; readonly tool: string; readonly rawChars: number }
  | { readonly kind: 'not_smaller' }
  | {
      readonly kind: 'view';
      readonly tool: string;
      /** The compact view, focus lines included, without its note. */
      readonly compact: string;
      readonly rawChars: number;
      readonly compactChars: number;
    };

/** A plan and the token counter memo that proved it (primed with the raw text's count). */
export interface PlannedView {
  readonly plan: CompressionPlan | undefined;
  readonly counter: MemoCounter | undefined;
}

/** The rendering half of compressToolResult for one options object (validated once). */
export type CompressionPlanner = ReturnType<typeof compressionPlanner>;

/**
 * A file read (read_file, `cat`, or an unknown tool's line-numbered output) shorter than this is
 * shown whole unless native read_file compaction is on: the agent asked for the file and edits
 * from it. Beyond it (a whole large file) it gets the bounded view of a file read.
 */
export const READ_MIN_CHARS = 20_000;
/** Search hits with context (by shape, whatever the tool) from this size get their view. */
export const SEARCH_HITS_MIN_CHARS = 4_000;
/** Outputs longer than this are not parsed for a wrapper or a shape (their tool's view applies). */
const SHAPE_MAX_CHARS = 1_000_000;

/**
 * The rendering half of `compressToolResult` for `options`, validated once: the tool-result stage
 * plans one view per result, the delta's bar and the compact candidate at once.
 */
export function compressionPlanner(options: CompressToolResultOptions) {
  const name = 'compressToolResult';
  requireVault(name, options);
  const flags = resolveFlags(name, options);
  const toolNames = validateToolNames(name, options.toolNames);
  const min = intOption(name, 'nativeMinChars', options.nativeMinChars, defaultInt('nativeMinChars'), 1000);
  const max = intOption(name, 'nativeMaxChars', options.nativeMaxChars, defaultInt('nativeMaxChars'), 1000);
  const terminalMin = intOption(name, 'terminalMinChars', options.terminalMinChars, 2000, 1);
  const terminalMax = intOption(name, 'terminalMaxChars', options.terminalMaxChars, 4000, 200);
  const diagnosticChars = intOption(name, 'diagnosticChars', options.diagnosticChars, DEFAULT_DIAGNOSTIC_CHARS, 0);
  const maxArtifactChars = intOption(
    name,
    'maxArtifactChars',
    options.maxArtifactChars,
    defaultInt('maxArtifactChars'),
    1,
  );
  const strategy = oneOfOption(name, 'nativeStrategy', options.nativeStrategy, 'auto', ['auto', 'reference', 'lines']);
  const backends = (options.backends ?? ['local']).map((b) => b.trim().toLowerCase());
  const env = options.env ?? process.env;

  /** What to compact, or undefined when the result is not eligible. */
  const inputOf = (result: ToolResult, tool: string, size: number): ViewInput | undefined => {
    if (tool === 'terminal') {
      if (size < terminalMin) return undefined;
      const command = commandOf(result.args);
      const terminal = readTerminalContent(result.content, result.exitCode);
      // A file the agent asked to read (`cat f`, `sed -n 10,40p f`) is shown as read_file is:
      // whole, up to the read threshold.
      if (!flags.nativeReadFile && isFileRead(command))
        return size < READ_MIN_CHARS ? undefined : { ...terminal, shape: 'file_read' };
      return { ...terminal, ...(command === undefined ? {} : { command }) };
    }
    // An MCP/JSON text wrapper is viewed by the text inside it (the vault keeps the wrapper).
    const output = size > SHAPE_MAX_CHARS ? result.content : (unwrapText(result.content) ?? result.content);
    const exit = result.exitCode === undefined ? {} : { exitCode: result.exitCode };
    // Recognised by shape whatever the tool is called (unknown names included).
    const shape = size > SHAPE_MAX_CHARS || size < SEARCH_HITS_MIN_CHARS ? undefined : outputShape(output);
    if (shape === 'search_hits') return { output, ...exit, shape, terms: searchTerms(result.args) };
    if (size < min) return undefined;
    const eligible = tool === 'search_files' || tool === 'process' || (tool === 'read_file' && flags.nativeReadFile);
    if (eligible) return { output, ...exit, ...(shape === 'listing' ? { shape } : {}) };
    if (tool === '' && shape === 'listing') return { output, ...exit, shape };
    if (size >= READ_MIN_CHARS && (tool === 'read_file' || (tool === '' && shape === 'numbered_read')))
      return { output, ...exit, shape: 'file_read' };
    return undefined;
  };
  const view = { terminalMaxChars: terminalMax, nativeMaxChars: max, diagnosticChars, strategy };
  // An output's pieces go to the request stages' memo, only when it counts with this very counter.
  const { measures, counter: own } = options;
  const notes =
    measures !== undefined && measures.counter === own && own?.pieces !== undefined
      ? { measures, pieces: own.pieces }
      : undefined;

  const plan = async (
    step: Step<ToolResult>,
    signal: AbortSignal,
    counter: MemoCounter | undefined,
  ): Promise<CompressionPlan | undefined> => {
    const result = step.value;
    if (!flags.native || isRendering(result.content)) return undefined;
    if (!backendAllowed(backendOf(result.args, env), backends)) return undefined;
    const tool = canonicalToolName(result.name, toolNames) ?? '';
    const raw = result.content;
    const rawChars = codePoints(raw);
    const input = inputOf(result, tool, rawChars);
    if (input === undefined) return undefined;
    // Size checks first: nothing beyond the ceiling is compacted whole, tokenized or stored.
    if (rawChars > maxArtifactChars) return { kind: 'over_ceiling', input, tool, rawChars };
    const made = (await renderToolViewInSlices(input, { ...view, tool }, signal)).trimEnd();
    if (made === '') return undefined;
    const terms = [...((await options.focus?.(step)) ?? []), ...focusTerms(stringsOf(result.args))];
    const compact = withFocusLines(made, input.output, terms);
    if (counter !== undefined && !counter.knows(raw)) {
      if (notes !== undefined && raw.length >= NOTED_FROM) {
        const { count, record } = await recordInSlices(notes.pieces, raw, signal);
        if (record !== undefined) notes.measures.notePieces(raw, record);
        counter.prime(raw, count);
      } else if (raw.length > COUNT_SLICE_CHARS) counter.prime(raw, await countInSlices(own!, raw, signal));
    }
    const viewPlan = { kind: 'view', tool, compact, rawChars, compactChars: codePoints(compact) } as const;
    // Size proof with the longest possible id before anything touches the vault.
    return strictlySmaller(raw, planOutput(viewPlan, LONGEST_ARTIFACT_ID), counter)
      ? viewPlan
      : { kind: 'not_smaller' };
  };
  return {
    options,
    view,
    maxArtifactChars,
    /** The plan for `step`'s value, proved with `counter` (a memo over `options.counter`). */
    plan: async (...args: Parameters<typeof plan>): Promise<PlannedView> => ({
      plan: await plan(...args),
      counter: args[2],
    }),
  };
}

/** The text compressToolResult delivers for a `view` plan once the original is vaulted as `artifactId`. */
export function planOutput(plan: Extract<CompressionPlan, { kind: 'view' }>, artifactId: string): string {
  return `${plan.compact}\n\n${renderNativeNote(plan.rawChars, plan.compactChars, artifactId)}`;
}
