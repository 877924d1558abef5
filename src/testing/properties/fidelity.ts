/**
 * The fidelity invariants (docs/fidelity.md) for request operators: prefix-kept (system/instructions
 * and every item before the first assistant item unchanged and in place); actions-kept (each tool call
 * and fenced command block of an assistant text verbatim); no-dangling-reference (a delta only against
 * an output shown inline in the same request, a receipt or digest only for content this conversation
 * showed inline or as a bounded view; a request not extending the previous input starts a new
 * conversation); diagnostics-kept (a digest keeps the diagnostic lines replay's ruler finds, failing
 * test ids included, up to 50 then their count, and the exit status).
 */ import { fencedBlocks } from '../../compile/actions.js';
import { DIGEST_MAX_DIAGNOSTICS, exitStatusOf } from '../../compile/digest.js';
import { diagnosticLines } from '../../measure/diagnostic-ruler.js';
import { parseDelta, slotText } from '../../compile/references.js';
import { canonicalJson } from '../../measure/index.js';
import { readRequest } from '../../model/index.js';
import type { Slot } from '../../model/types.js';
import { referencedArtifacts } from '../../receipts/index.js';
import type { ProviderRequest } from '../../step.js';
import { artifactIdFor } from '../../vault/index.js';
import { firstDifference } from '../deep.js';
import { conversationItems } from '../format.js';
import {
  checkedRun,
  InvariantViolation,
  stagesOf,
  type InvariantName,
  type InvariantOptions,
  type OperatorUnderTest,
} from '../harness.js';
import { prefixBreak } from './cache-stable.js';

const clip = (s: string): string => (s.length > 100 ? `${s.slice(0, 97)}…` : s);
/** A tool output or an observation, named for a report. */
const slotName = (slot: Slot): string =>
  slot.kind === 'user' ? `user message ${slot.item}` : `tool output ${slot.callId ?? '?'}`;

/** Index of the first assistant item (the end of the instruction prefix); the list length when none. */
function prefixLength(request: ProviderRequest): number {
  const info = readRequest(request).itemInfo;
  const i = info.findIndex((x) => x.role === 'assistant');
  return i === -1 ? info.length : i;
}

/**
 * Where the output's instruction prefix differs from the input's; undefined when it is kept.
 *
 * @example
 * import { prefixChange } from 'token-terminator/testing';
 * import { expect } from 'vitest';
 * expect(prefixChange(input, output)).toBeUndefined(); // instructions and earlier turns kept
 */
export function prefixChange(input: ProviderRequest, output: ProviderRequest): string | undefined {
  for (const key of ['system', 'instructions'] as const) {
    const d = firstDifference(input[key], output[key]);
    if (d !== undefined) return `${key}: ${d}`;
  }
  const a = conversationItems(input);
  const b = conversationItems(output);
  const n = prefixLength(input);
  for (let i = 0; i < n; i++) {
    const d = firstDifference(a[i], b[i]);
    if (d !== undefined) return `conversation item ${i} of the prefix: ${d}`;
  }
  return undefined;
}

/**
 * The actions of a request: tool calls (as their slot values) and fenced blocks of assistant texts.
 *
 * @example
 * import { actionsOf } from 'token-terminator/testing';
 * const { calls, blocks } = actionsOf(request); // tool calls and fenced blocks of assistant texts
 */
export function actionsOf(request: ProviderRequest): { calls: unknown[]; blocks: string[] } {
  const view = readRequest(request);
  const calls = view.slots.filter((s) => s.kind === 'tool_call').map((s) => s.value);
  const blocks = view.slots
    .filter((s) => s.kind === 'assistant' && s.text !== undefined)
    .flatMap((s) => fencedBlocks(s.text!));
  return { calls, blocks };
}

/**
 * The first action of the input missing from the output; undefined when all are kept.
 *
 * @example
 * import { missingAction } from 'token-terminator/testing';
 * import { expect } from 'vitest';
 * expect(missingAction(input, output)).toBeUndefined();
 */
export function missingAction(input: ProviderRequest, output: ProviderRequest): string | undefined {
  const a = actionsOf(input);
  const b = actionsOf(output);
  for (const call of a.calls)
    if (!b.calls.some((c) => firstDifference(call, c) === undefined)) return `tool call ${clip(JSON.stringify(call))}`;
  const texts = readRequest(output)
    .slots.filter((s) => s.kind === 'assistant' && s.text !== undefined)
    .map((s) => s.text!);
  for (const block of a.blocks)
    if (!texts.some((t) => t.includes(block))) return `command block ${clip(JSON.stringify(block))}`;
  return undefined;
}

/**
 * The artifacts an output request shows: inline outputs (by content id), and the receipts of bounded views.
 *
 * @example
 * import { shownArtifacts } from 'token-terminator/testing';
 * const shown = shownArtifacts(request); // ids of the artifacts this request shows
 */
export function shownArtifacts(request: ProviderRequest): Set<string> {
  const view = readRequest(request);
  const shown = new Set<string>();
  for (const slot of view.slots) {
    const text =
      slot.kind === 'tool_output'
        ? slotText(slot.value)
        : slot.kind === 'user' || slot.kind === 'assistant'
          ? slot.text
          : undefined;
    if (text === undefined) continue;
    if (!text.startsWith('[Token Terminator')) {
      shown.add(artifactIdFor(text));
      if (slot.kind === 'tool_output' && typeof slot.value !== 'string')
        shown.add(artifactIdFor(canonicalJson(slot.value)));
      // A text-part list (an observation in Responses / Anthropic shape) is vaulted as its canonical JSON.
      const content = slot.kind === 'user' ? (slot.value as { content?: unknown }).content : undefined;
      if (Array.isArray(content)) shown.add(artifactIdFor(canonicalJson(content)));
      // A view above its receipt shows the output it names.
      const lines = text.trimEnd().split('\n');
      if (lines.length > 1) for (const id of referencedArtifacts(lines.at(-1)!)) shown.add(id);
    }
  }
  return shown;
}

/**
 * Reference problems of one output request, given what its conversation showed before it.
 *
 * @example
 * import { danglingReferences, shownArtifacts } from 'token-terminator/testing';
 * import { expect } from 'vitest';
 * expect(danglingReferences(output, shownArtifacts(previous))).toEqual([]);
 */
export function danglingReferences(request: ProviderRequest, shownBefore: ReadonlySet<string>): string[] {
  const view = readRequest(request);
  const here = shownArtifacts(request);
  // Tool outputs, and the user messages after the prefix (a text-protocol agent's observations).
  const start = view.itemInfo.findIndex((x) => x.role === 'assistant');
  const outputs: Slot[] = view.slots.filter(
    (s) => s.kind === 'tool_output' || (s.kind === 'user' && start !== -1 && s.item !== undefined && s.item > start),
  );
  const problems: string[] = [];
  for (const slot of outputs) {
    const text = slot.kind === 'user' ? slot.text : slotText(slot.value);
    if (text === undefined) continue;
    const delta = parseDelta(text);
    if (delta !== undefined) {
      if (!here.has(delta.previous))
        problems.push(`${slotName(slot)} is a delta against ${delta.previous}, which this request does not show`);
      continue;
    }
    if (!text.startsWith('[Token Terminator')) continue;
    for (const id of referencedArtifacts(text)) {
      if (!here.has(id) && !shownBefore.has(id))
        problems.push(`${slotName(slot)} names ${id}, which this conversation was never shown`);
    }
  }
  return problems;
}

/**
 * An invariant that checks each output request against its input (and the input before it):
 * `problem`, made anew for each run, says what is wrong with one request, or nothing.
 */
function eachRequest(
  invariant: InvariantName,
  problem: () => (input: ProviderRequest, output: ProviderRequest, previous?: ProviderRequest) => string | undefined,
): (
  op: OperatorUnderTest<ProviderRequest>,
  options: InvariantOptions<ProviderRequest>,
) => (values: readonly ProviderRequest[]) => Promise<void> {
  return (op, options) => (values) =>
    checkedRun(invariant, op, options, values, (steps, result) => {
      const check = problem();
      result.outputs.forEach((out, i) => {
        const found = check(steps[i]!.value, out.value, steps[i - 1]?.value);
        if (found !== undefined) throw new InvariantViolation(invariant, `request ${i} (${stagesOf(out)})`, found);
      });
    });
}

/** The prefix-kept check: no output request changes the instruction prefix of its input. */
export const prefixKeptPredicate = eachRequest('prefix-kept', () => (input, output) => {
  const change = prefixChange(input, output);
  return change === undefined ? undefined : `the instruction prefix changed: ${change}`;
});

/** The actions-kept check: every assistant action of an input request is still in its output. */
export const actionsKeptPredicate = eachRequest('actions-kept', () => (input, output) => {
  const missing = missingAction(input, output);
  return missing === undefined ? undefined : `an assistant action of the input is missing: ${missing}`;
});

/** The no-dangling-reference check: an output only refers to artifacts this conversation has already shown. */
export const noDanglingReferencePredicate = eachRequest('no-dangling-reference', () => {
  let shown = new Set<string>();
  return (input, output, previous) => {
    // A request that does not extend the previous one is another conversation.
    if (previous !== undefined && prefixBreak(previous, input) !== undefined) shown = new Set();
    const problems = danglingReferences(output, shown);
    for (const id of shownArtifacts(output)) shown.add(id);
    return problems.length > 0 ? problems.join('; ') : undefined;
  };
});

/**
 * What the digests of an output request leave out of the outputs they stand for: every failing
 * test id and every diagnostic line (docs/fidelity.md) must be in the digest, up to
 * `DIGEST_MAX_DIAGNOSTICS` lines (50), and the digest must give the count of the rest. An output's
 * original is its slot in `input` with the same call id (tool outputs) or item (observations).
 *
 * @example
 * import { missingDiagnostics } from 'token-terminator/testing';
 * import { expect } from 'vitest';
 * expect(missingDiagnostics(input, output)).toEqual([]);
 */
export function missingDiagnostics(input: ProviderRequest, output: ProviderRequest): string[] {
  const before = readRequest(input);
  const originalOf = (slot: Slot): string | undefined => {
    const same = before.slots.find((s) =>
      slot.kind === 'tool_output'
        ? s.kind === 'tool_output' && s.callId === slot.callId
        : s.kind === slot.kind && s.item === slot.item,
    );
    return same === undefined ? undefined : same.kind === 'user' ? same.text : slotText(same.value);
  };
  const problems: string[] = [];
  for (const slot of readRequest(output).slots) {
    if (slot.kind !== 'tool_output' && slot.kind !== 'user') continue;
    const text = slot.kind === 'user' ? slot.text : slotText(slot.value);
    if (text === undefined || !text.startsWith('[Token Terminator digest')) continue;
    const original = originalOf(slot);
    if (original === undefined || original.startsWith('[Token Terminator')) continue;
    const where = slotName(slot);
    // Judged by replay's ruler (src/measure/diagnostic-ruler.ts, read by replay), not by the classifier the digest uses.
    const exit = exitStatusOf(original);
    const distinct = diagnosticLines(original, Infinity).filter(
      (l) => !(exit !== undefined && /^\[exit code: -?\d+\]$|\bexit(?:ed with)? (?:code|status)|<returncode>/i.test(l)),
    );
    const present = (line: string): boolean => text.includes(Array.from(line).slice(0, 150).join(''));
    // Past its bound a digest counts what it leaves out: nothing may be lost silently.
    const counted = /\u2026 (\d+) more diagnostic lines?/.exec(text);
    if (counted === null) {
      for (const line of distinct)
        if (!present(line)) problems.push(`${where}: the digest lost the diagnostic line ${clip(line)}`);
    } else {
      const shown = distinct.filter(present).length;
      if (shown < Math.min(distinct.length, DIGEST_MAX_DIAGNOSTICS / 2) || shown + Number(counted[1]) < distinct.length)
        problems.push(
          `${where}: the digest shows ${shown} and counts ${counted[1]} of ${distinct.length} diagnostic lines`,
        );
    }
    if (distinct.length > DIGEST_MAX_DIAGNOSTICS + 1 && counted === null)
      problems.push(`${where}: the digest neither shows nor counts ${distinct.length} diagnostic lines`);
    if (exit !== undefined && !text.split('\n')[0]!.includes(`exit ${exit}`))
      problems.push(`${where}: the digest does not say the exit status ${exit}`);
  }
  return problems;
}

/**
 * The failure lines of `output` that a first view of it leaves out, as replay's ruler
 * (src/measure/diagnostic-ruler.ts) finds them: each must be a whole line of `view`. Independent of
 * the compactors' classifier, so a classifier that misses a line cannot pass its own check.
 *
 * @example
 * import { missingFailureLines } from 'token-terminator/testing';
 * expect(missingFailureLines(run.output, view)).toEqual([]);
 */
export function missingFailureLines(output: string, view: string): string[] {
  const shown = new Set(view.split('\n').map((l) => l.trim()));
  return diagnosticLines(output, Infinity).filter((l) => !shown.has(l));
}

/** The diagnostics-kept check: every digest keeps the failing test ids and diagnostic lines of its output. */
export const diagnosticsKeptPredicate = eachRequest('diagnostics-kept', () => (input, output) => {
  const problems = missingDiagnostics(input, output);
  return problems.length > 0 ? problems.join('; ') : undefined;
});
