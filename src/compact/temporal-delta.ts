/**
 * The pure half of deltaRepeatedOutput: which baseline a terminal run belongs to, the rendering a
 * delta must beat, and the delta itself (a note that nothing changed, or a unified diff).
 */
import { createHash } from 'node:crypto';
import { strictlySmaller } from '../accept.js';
import { renderNativeNote } from '../receipts/index.js';
import type { Step, ToolResult } from '../step.js';
import { backendOf, cwdOf, normalizeCommand } from '../tools/command.js';
import { planOutput, type CompressionPlanner, type PlannedView } from './compression-plan.js';
import { unifiedLineDiff } from './delta.js';
import { compactTerminal, readTerminalContent } from './index.js';
import { codePoints } from '../measure/canonical-json.js';
import type { PutResult } from '../vault/types.js';
import { memoCounter, type MemoCounter } from './receipt.js';

/** The baseline key of a terminal run: its backend, normalised command, cwd, and (per scope) session and tenant. */
export function baselineKey(
  step: Step<ToolResult>,
  command: string,
  scope: 'session' | 'workspace',
  env: Readonly<Record<string, string | undefined>>,
): string {
  const { args } = step.value;
  return createHash('sha256')
    .update(
      JSON.stringify({
        backend: backendOf(args, env),
        command: normalizeCommand(command),
        cwd: cwdOf(args, step.context.cwd ?? process.cwd()),
        session: scope === 'session' ? step.context.sessionId : '',
        ...(step.context.tenant ? { tenant: step.context.tenant } : {}),
      }),
    )
    .digest('hex');
}

/** The terminal compaction at `maxChars` with its note, when smaller than the raw output (the bar used alone). */
export function ownBar(
  result: ToolResult,
  command: string,
  artifactId: string,
  counter: MemoCounter | undefined,
  maxChars = 4000,
): string {
  const terminal = readTerminalContent(result.content, result.exitCode);
  const compact = compactTerminal({ command, ...terminal }, { maxChars }).text;
  const compactFull = `${compact.trimEnd()}\n\n${renderNativeNote(codePoints(result.content), codePoints(compact), artifactId)}`;
  return strictlySmaller(result.content, compactFull, counter) ? compactFull : result.content;
}

/**
 * What the compact candidate would show for this result (the raw output when it would leave it
 * alone), with the planned view it comes from. `counter` is the delta's memo over `own`.
 */
export async function compressionBar(
  planner: CompressionPlanner,
  step: Step<ToolResult>,
  signal: AbortSignal,
  put: PutResult,
  counter: MemoCounter | undefined,
  own: unknown,
): Promise<{ readonly bar: string; readonly planned: PlannedView }> {
  const raw = step.value.content;
  const theirs = planner.options.counter;
  const planned = await planner.plan(step, signal, theirs === own ? counter : memoCounter(theirs));
  const { plan } = planned;
  // Anything but a view leaves the result as it is (a bounded view is only made over the ceiling, never vaulted).
  if (plan?.kind !== 'view') return { bar: raw, planned };
  const shown = planOutput(plan, put.artifactId);
  return { bar: strictlySmaller(raw, shown, planned.counter) ? shown : raw, planned };
}

/**
 * The session rendering under which deltaRepeatedOutput leaves the first view a delta stands in
 * for: `=` when that view is the output itself, `>` and the view otherwise. A request that does
 * not show the delta's base gets this view instead (src/compile/references.ts): a session id reused
 * by a new conversation sees what a new session would, never the whole output.
 */
export const deltaViewKey = (current: string): string => `delta.view.v1:${current}`;

/** The stored value of {@link deltaViewKey} for `bar` (the first view) of `raw`. */
export const encodeDeltaView = (bar: string, raw: string): string => (bar === raw ? '=' : `>${bar}`);

/**
 * The delta of `result` against its baseline `before` (undefined when the two are the same
 * artifact): a note that nothing changed, a header and a unified diff shorter than `bar`, or
 * undefined when no diff fits.
 */
export function deltaText(
  result: ToolResult,
  command: string,
  ids: { readonly current: string; readonly previous: string },
  before: string | undefined,
  bar: string,
): string | undefined {
  const exit = result.exitCode === undefined ? '' : `\n[exit code: ${result.exitCode}]`;
  if (before === undefined)
    return `[Token Terminator temporal delta: no output changes since the previous execution | current=${ids.current} | previous=${ids.previous} | recover exact current output with token_terminator action=artifact_get]${exit}`;
  const label = command.replace(/[\r\n]+/g, ' ').slice(0, 80) || 'terminal';
  const header = `[Token Terminator temporal delta | current=${ids.current} | previous=${ids.previous} | exact current output: token_terminator action=artifact_get]${exit}`;
  const diff = unifiedLineDiff(
    before,
    result.content,
    `${label} :: ${ids.previous}`,
    `${label} :: ${ids.current}`,
    codePoints(bar) - header.length,
  );
  return diff === undefined ? undefined : header + diff;
}
