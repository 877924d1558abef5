/**
 * `compressToolResult`: large search_files / process results (and read_file in aggressive mode)
 * compacted natively, terminal results through the built-in per-family compactors (a plain file read such as `cat f` only in aggressive mode, as read_file). The exact
 * original is vaulted, read back and pinned before the compact text + recovery note replaces it.
 */
import { defaultInt } from '../src/config/index.js';
import { STAGES } from '../src/stages.js';
import type { OperatorFunction } from 'rxjs';
import { DEFAULT_DIAGNOSTIC_CHARS, readTerminalContent } from '../src/compact/index.js';
import { focusTerms, withFocusLines } from '../src/compact/focus.js';
import { excerptLargeOutput } from '../src/compact/large-output.js';
import { argStrings } from '../src/compile/focus.js';
import { codePointLength } from '../src/compact/lines.js';
import { strictlySmaller } from '../src/accept.js';
import { isRendering, preparedFor } from '../src/compact/prepared.js';
import {
  LONGEST_ARTIFACT_ID,
  memoCounter,
  pinDelivered,
  vaultToolResult,
  type MemoCounter,
} from '../src/compact/receipt.js';
import { COUNT_SLICE_CHARS, countInSlices } from '../src/compact/slices.js';
import { renderToolView, renderToolViewInSlices, type ViewInput, type ViewOptions } from '../src/compact/tool-view.js';
import type { ModeFlags } from '../src/config/index.js';
import type { Mode } from '../src/config/types.js';
import { intOption, oneOfOption, requireVault } from '../src/options.js';
import type { TokenCounter } from '../src/measure/types.js';
import { stepOperator } from '../src/operator-kit.js';
import { renderNativeNote } from '../src/receipts/index.js';
import { advance, note, storeScope, type Step, type ToolResult } from '../src/step.js';
import { backendAllowed, backendOf, commandOf } from '../src/tools/command.js';
import { isFileRead } from '../src/tools/family.js';
import { resolveFlags } from '../src/tools/modes.js';
import { canonicalToolName, validateToolNames } from '../src/tools/names.js';
import type { ArtifactStore, LeaseStore } from '../src/vault/ports.js';

const STAGE = STAGES.compressToolResult;

/** Options of {@link compressToolResult}; only `vault` is required. */
export interface CompressToolResultOptions {
  /** Where exact originals go (required). */
  readonly vault: ArtifactStore & LeaseStore;
  /**
   * Exact token counter: a replacement must also use fewer tokens.
   *
   * @defaultValue none (only the character count is compared)
   */
  readonly counter?: TokenCounter;
  /**
   * Mode gate; ignored when `flags` is given.
   *
   * @defaultValue `'balanced'`
   */
  readonly mode?: Mode;
  /**
   * Mode flags computed from the config: `native` gates everything, `nativeReadFile` adds read_file.
   *
   * @defaultValue the flags of `mode`
   */
  readonly flags?: ModeFlags;
  /**
   * search_files/process/read_file results shorter than this (code points) are untouched (≥ 1000).
   *
   * @defaultValue `12000` (config `nativeMinChars`)
   */
  readonly nativeMinChars?: number;
  /**
   * Target size of native compact text (≥ 1000).
   *
   * @defaultValue `8000` (config `nativeMaxChars`)
   */
  readonly nativeMaxChars?: number;
  /**
   * Terminal results shorter than this are untouched (≥ 1).
   *
   * @defaultValue `2000`
   */
  readonly terminalMinChars?: number;
  /**
   * Target size of line-budgeted terminal renderings (≥ 200).
   *
   * @defaultValue `4000`
   */
  readonly terminalMaxChars?: number;
  /**
   * 'auto' keeps the smaller of the reference and line modes (the line mode when the reference
   * cut would drop a diagnostic line); or force one.
   *
   * @defaultValue `'auto'`
   */
  readonly nativeStrategy?: 'auto' | 'reference' | 'lines';
  /**
   * Budget, in code points, for the diagnostic lines of a failing output (and the match lines of
   * a search), kept verbatim on top of the size targets (≥ 0; 0 turns the guarantee off).
   *
   * @defaultValue `8000`
   */
  readonly diagnosticChars?: number;
  /**
   * Longer results cannot be vaulted (TOKEN_TERMINATOR_MAX_ARTIFACT_CHARS): they get a bounded
   * view with a note saying so, built without compacting or tokenizing the whole.
   *
   * @defaultValue `2_000_000` (config `maxArtifactChars`)
   */
  readonly maxArtifactChars?: number;
  /**
   * Terminal backends allowed, compared case-insensitively (`all` allows every one).
   *
   * @defaultValue `['local']`
   */
  readonly backends?: readonly string[];
  /**
   * Host tool name → canonical name (search_files, process, read_file, terminal).
   *
   * @defaultValue none (only the canonical names and their built-in aliases are recognised)
   */
  readonly toolNames?: Readonly<Record<string, string>>;
  /**
   * Environment read for TERMINAL_ENV/TERMINAL_BACKEND.
   *
   * @defaultValue `process.env`
   */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /**
   * The names the conversation is about (its task, the agent's recent messages), for this
   * result's session: a view that leaves lines out keeps the lines of the output that mention one
   * of them or a name in the call's arguments (src/compact/focus.ts). `createTerminator` wires
   * the terms of the session's latest request.
   *
   * @defaultValue none (only the call's arguments)
   */
  readonly focus?: (step: Step<ToolResult>) => readonly string[] | Promise<readonly string[]>;
}

/**
 * What {@link compressToolResult} would do with one result before anything touches the vault:
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
export interface CompressionPlanner {
  readonly options: CompressToolResultOptions;
  readonly view: Omit<ViewOptions, 'tool'>;
  readonly maxArtifactChars: number;
  /** The plan for `step`'s value, proved with `counter` (a memo over `options.counter`). */
  plan(step: Step<ToolResult>, signal: AbortSignal, counter: MemoCounter | undefined): Promise<PlannedView>;
}

/**
 * The rendering half of {@link compressToolResult} for `options`, validated once: a stage given
 * compressToolResult's options (deltaRepeatedOutput's `compression`) renders with exactly its
 * view and hands the rendering on, keyed by that options object, in the decision it returns.
 *
 * @example
 * const planner = compressionPlanner({ vault });
 * const { plan } = await planner.plan(step, new AbortController().signal, undefined);
 */
export function compressionPlanner(options: CompressToolResultOptions): CompressionPlanner {
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
      // A file the agent asked to read (`cat f`, `sed -n 10,40p f`) is shown as read_file is.
      if (!flags.nativeReadFile && isFileRead(command)) return undefined;
      const { output, exitCode } = readTerminalContent(result.content, result.exitCode);
      return { output, ...(command === undefined ? {} : { command }), ...(exitCode === undefined ? {} : { exitCode }) };
    }
    const eligible = tool === 'search_files' || tool === 'process' || (tool === 'read_file' && flags.nativeReadFile);
    if (!eligible || size < min) return undefined;
    return result.exitCode === undefined
      ? { output: result.content }
      : { output: result.content, exitCode: result.exitCode };
  };
  const view = { terminalMaxChars: terminalMax, nativeMaxChars: max, diagnosticChars, strategy };

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
    const rawChars = codePointLength(raw);
    const input = inputOf(result, tool, rawChars);
    if (input === undefined) return undefined;
    // Size checks first: nothing beyond the ceiling is compacted whole, tokenized or stored.
    if (rawChars > maxArtifactChars) return { kind: 'over_ceiling', input, tool, rawChars };
    const made = (await renderToolViewInSlices(input, { ...view, tool }, signal)).trimEnd();
    if (made === '') return undefined;
    const terms = [...((await options.focus?.(step)) ?? []), ...focusTerms(argStrings(result.args))];
    const compact = withFocusLines(made, input.output, terms);
    if (counter !== undefined && raw.length > COUNT_SLICE_CHARS && !counter.knows(raw))
      counter.prime(raw, await countInSlices(options.counter!, raw, signal));
    const compactChars = codePointLength(compact);
    // Size proof with the longest possible id before anything touches the vault.
    if (
      !strictlySmaller(raw, `${compact}\n\n${renderNativeNote(rawChars, compactChars, LONGEST_ARTIFACT_ID)}`, counter)
    ) {
      return { kind: 'not_smaller' };
    }
    return { kind: 'view', tool, compact, rawChars, compactChars };
  };
  return {
    options,
    view,
    maxArtifactChars,
    plan: async (step, signal, counter) => ({ plan: await plan(step, signal, counter), counter }),
  };
}

/** The text compressToolResult delivers for a `view` plan once the original is vaulted as `artifactId`. */
export function planOutput(plan: Extract<CompressionPlan, { kind: 'view' }>, artifactId: string): string {
  return `${plan.compact}\n\n${renderNativeNote(plan.rawChars, plan.compactChars, artifactId)}`;
}

/**
 * Replace each large tool result with a smaller faithful view plus a recovery note, after the exact
 * original is vaulted and read back; any other result, or any failure, passes through unchanged.
 *
 * @example
 * results$.pipe(compressToolResult({ vault, counter: createTiktokenCounter() }))
 */
export function compressToolResult(
  options: CompressToolResultOptions,
): OperatorFunction<Step<ToolResult>, Step<ToolResult>> {
  const planner = compressionPlanner(options);
  const { vault } = options;
  const { view, maxArtifactChars } = planner;

  return stepOperator<ToolResult>(STAGE, () => async (step, signal) => {
    const result = step.value;
    // What an earlier stage of this pass (a skipped delta) already vaulted and rendered.
    const shared = preparedFor(step, vault);
    const known = shared?.views.get(options) as PlannedView | undefined;
    shared?.views.delete(options); // used once: a Step the host keeps does not keep the view alive
    const { plan, counter } = known ?? (await planner.plan(step, signal, memoCounter(options.counter)));
    if (plan === undefined) return undefined;
    if (plan.kind === 'over_ceiling') return overCeiling(step, plan.input, plan.tool, plan.rawChars, signal);
    if (plan.kind === 'not_smaller') return note(step, { stage: STAGE, kind: 'skipped', reason: 'not_smaller' });
    const raw = result.content;
    signal.throwIfAborted(); // nothing is written after an abort
    const scope = storeScope(step.context);
    const put = shared?.put ?? (await vaultToolResult(vault, result, step.context));
    const output = planOutput(plan, put.artifactId);
    if (!strictlySmaller(raw, output, counter))
      return note(step, { stage: STAGE, kind: 'skipped', reason: 'not_smaller' });
    // The note is about to be delivered: retention must never prune what it names.
    signal.throwIfAborted();
    await pinDelivered(vault, [put.artifactId], scope);
    const savedTokens = counter === undefined ? {} : { savedTokens: counter.count(raw) - counter.count(output) };
    return advance(
      step,
      { ...result, content: output },
      {
        stage: STAGE,
        kind: 'applied',
        reason: plan.tool === 'terminal' ? 'terminal_compacted' : 'native_compacted',
        savedChars: plan.rawChars - codePointLength(output),
        ...savedTokens,
        artifacts: [put.artifactId],
      },
    );
  });

  /** A bounded view of an output that cannot be stored, saying so; read in slices, never counted whole. */
  async function overCeiling(
    step: Step<ToolResult>,
    input: ViewInput,
    tool: string,
    rawChars: number,
    signal: AbortSignal,
  ): Promise<Step<ToolResult>> {
    // Beyond 4× the ceiling only the head and tail are read: the work stays bounded.
    const excerpt = await excerptLargeOutput(input.output, { signal, scanMiddle: rawChars <= 4 * maxArtifactChars });
    const what = excerpt.middleScanned
      ? 'its first and last lines and the diagnostic lines between them'
      : 'its first and last lines';
    const head =
      `[Token Terminator: this output is ${fmt(rawChars)} chars, over the ${fmt(maxArtifactChars)}-char artifact ceiling ` +
      `(TOKEN_TERMINATOR_MAX_ARTIFACT_CHARS): it was not stored and cannot be recovered. Shown: a compact view of ${what}. ` +
      'Counts in it cover the shown parts only. Re-run the command with narrower output (grep, head, tail) to see the rest.]';
    const output = `${head}\n${renderToolView({ ...input, output: excerpt.text }, { ...view, tool }).trimEnd()}`;
    return advance(
      step,
      { ...step.value, content: output },
      { stage: STAGE, kind: 'applied', reason: 'over_ceiling', savedChars: rawChars - codePointLength(output) },
    );
  }
}

const fmt = (n: number): string => n.toLocaleString('en-US');
