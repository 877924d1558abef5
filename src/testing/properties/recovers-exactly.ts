import { createHash } from 'node:crypto';
import { codePoints, stringsOf } from '../../measure/canonical-json.js';
import { isReceipt, parseReceipt, referencedArtifacts } from '../../receipts/index.js';
import type { Step } from '../../step.js';
import type { ArtifactStore } from '../../vault/ports.js';
import { derivedProvenance, provenance } from '../deep.js';
import {
  checkedRun,
  describeError,
  type InvariantOptions,
  InvariantViolation,
  type OperatorUnderTest,
  stagesOf,
} from '../harness.js';

const NATIVE_NOTE = /full artifact=(a_[0-9a-f]{32}(?:[0-9a-f]{32})?)/gu;

/**
 * Every receipt recovers exactly: each artifact a marker in an output names (not already in the
 * inputs) pages back as text the caller supplied, or as caller structure whose own markers recover
 * exactly (one more hop: collapsed turns holding receipts). Receipts and native notes recover the
 * exact replaced text (`chars` and digest match); a changed tool result names its exact original.
 */
export function recoversExactlyPredicate<T>(
  op: OperatorUnderTest<T>,
  options: InvariantOptions<T>,
): (values: readonly T[]) => Promise<void> {
  return (values) =>
    checkedRun('recovers-exactly', op, options, values, async (steps, result) => {
      for (const [i, out] of result.outputs.entries()) {
        await checkRecovery(
          options.vault,
          steps.slice(0, i + 1).map((s) => s.value),
          out,
          `step ${i} (${stagesOf(out)})`,
        );
      }
    });
}

/**
 * Read a whole artifact through `page`, as the recovery tool would.
 *
 * @example
 * import { readArtifact } from 'token-terminator/testing';
 * const original = await readArtifact(vault, artifactId);
 */
export async function readArtifact(vault: ArtifactStore, artifactId: string): Promise<string> {
  let offset = 0;
  let text = '';
  for (let pages = 0; pages < 100_000; pages++) {
    const page = await vault.page(artifactId, offset);
    text += page.content;
    if (page.nextOffset === null) return text;
    if (page.nextOffset <= offset) throw new Error(`page of ${artifactId} did not advance past offset ${offset}`);
    offset = page.nextOffset;
  }
  throw new Error(`artifact ${artifactId} did not end`);
}

/**
 * The recovery check for one output against the inputs seen so far (the last one is this
 * output's input). Throws an InvariantViolation; usable from custom harnesses.
 *
 * @example
 * import { checkRecovery } from 'token-terminator/testing';
 * await checkRecovery(vault, inputs, out, 'myOperator'); // every receipt in out pages back exactly
 */
export async function checkRecovery(
  vault: ArtifactStore,
  inputs: readonly unknown[],
  out: Step<unknown>,
  where: string,
): Promise<void> {
  const input = inputs[inputs.length - 1];
  const broken = (detail: string): InvariantViolation => new InvariantViolation('recovers-exactly', where, detail);
  const known = new Set(stringsOf(inputs).flatMap((s) => referencedArtifacts(s)));
  const leaves = stringsOf(out.value);
  const recovered = new Map<string, string>();
  for (const id of new Set(leaves.flatMap((s) => referencedArtifacts(s)))) {
    if (known.has(id)) continue;
    let content: string;
    try {
      content = await readArtifact(vault, id);
    } catch (error) {
      throw broken(
        `the output names artifact ${id} but the vault cannot return it (${describeError(error)}): a receipt without a verified write`,
      );
    }
    if (provenance(content, inputs) === undefined && !(await derivedFromInputs(vault, content, inputs, known)))
      throw broken(`artifact ${id} (${codePoints(content)} chars) is not text the caller supplied`);
    recovered.set(id, content);
  }
  const exact = (id: string, what: string): string => {
    const content = recovered.get(id);
    if (content === undefined) return '';
    const kind = provenance(content, inputs);
    if (kind !== 'exact' && kind !== 'structure')
      throw broken(`${what} ${id} recovers only part of the text it replaced (${codePoints(content)} chars)`);
    return content;
  };
  for (const leaf of leaves) {
    for (const line of leaf.split('\n')) {
      if (!isReceipt(line)) continue;
      const receipt = parseReceipt(line)!;
      const content = exact(receipt.artifactId, 'receipt');
      if (content === '' && !recovered.has(receipt.artifactId)) continue;
      if (receipt.chars !== codePoints(content))
        throw broken(
          `receipt ${receipt.artifactId} says chars=${receipt.chars} but the artifact has ${codePoints(content)}`,
        );
      const digest = createHash('sha256').update(content, 'utf8').digest('hex');
      if (receipt.sha256Prefix !== undefined && !digest.startsWith(receipt.sha256Prefix))
        throw broken(`receipt ${receipt.artifactId} digest does not match the artifact`);
    }
    for (const m of leaf.matchAll(NATIVE_NOTE)) exact(m[1]!, 'native note');
  }
  // A tool result whose content changed must keep its exact original recoverable.
  const changed = isToolResult(input) && isToolResult(out.value) && out.value.content !== input.content;
  if (changed && ![...recovered.values()].includes(input.content))
    throw broken(
      `tool result content changed (${codePoints(input.content)} → ${codePoints(out.value.content)} chars) but no artifact it names holds the exact original`,
    );
}

/**
 * An artifact that is the JSON of caller-supplied structure in which an earlier stage had already
 * put markers (e.g. turns collapsed after their tool outputs became receipts): accepted when every
 * such marker names an artifact holding exactly the caller's text it replaced. One hop only: the
 * nested artifacts must themselves be text the caller supplied.
 */
async function derivedFromInputs(
  vault: ArtifactStore,
  content: string,
  inputs: readonly unknown[],
  known: ReadonlySet<string>,
): Promise<boolean> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(content);
  } catch {
    return false;
  }
  const nested = new Map<string, string>();
  for (const id of new Set(stringsOf(parsed).flatMap((s) => referencedArtifacts(s)))) {
    if (known.has(id)) continue;
    try {
      const text = await readArtifact(vault, id);
      if (provenance(text, inputs) === 'exact' || provenance(text, inputs) === 'structure') nested.set(id, text);
    } catch {
      // An unreadable nested artifact is simply not evidence: the match below fails.
    }
  }
  return nested.size > 0 && derivedProvenance(parsed, inputs, nested, referencedArtifacts);
}

function isToolResult(v: unknown): v is { content: string; callId: string } {
  return (
    typeof v === 'object' &&
    v !== null &&
    typeof (v as { content?: unknown }).content === 'string' &&
    typeof (v as { callId?: unknown }).callId === 'string'
  );
}
