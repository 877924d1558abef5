/** Shared helpers for the tool-stream operator tests (real git, fixtures, recovery checks). */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { firstValueFrom, from, toArray, type OperatorFunction } from 'rxjs';
import { referencedArtifacts } from '../../src/receipts/index.js';
import { createStep, type Step, type StepContext, type ToolResult } from '../../src/step.js';
import { readArtifact } from '../../src/testing/properties/recovers-exactly.js';
import { CASE1_COMMAND, case1Diff, nativeSearchFixture } from '../../src/cli/bench/tool-cases.js';
import type { Vault } from '../../src/vault/types.js';

export const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), '../fixtures/terminal');
export const fixture = (name: string): string => readFileSync(join(FIXTURES, name), 'utf8');

export { CASE1_COMMAND, nativeSearchFixture };

/** facts §4 case 1 in a temp git repository (the shared fixture generator). */
export function case1GitDiff(root = mkdtempSync(join(tmpdir(), 'tt-case1-'))): { cwd: string; diff: string } {
  return { cwd: root, diff: case1Diff(root) };
}

export const result = (
  name: string,
  content: string,
  args: Record<string, unknown> = {},
  exitCode?: number,
): ToolResult =>
  exitCode === undefined
    ? { callId: `call-${name}`, name, args, content }
    : { callId: `call-${name}`, name, args, content, exitCode };

export function runOp(
  op: OperatorFunction<Step<ToolResult>, Step<ToolResult>>,
  results: readonly ToolResult[],
  context: StepContext = { sessionId: 's1' },
): Promise<Step<ToolResult>[]> {
  return firstValueFrom(from(results.map((r) => createStep(r, context))).pipe(op, toArray()));
}

/** Every artifact the output names recovers; the first one recovers `raw` exactly. */
export async function expectRecovers(vault: Vault, output: string, raw: string): Promise<string[]> {
  const ids = referencedArtifacts(output);
  if (ids.length === 0) throw new Error('no artifact named in the output');
  const texts = await Promise.all(ids.map((id) => readArtifact(vault, id)));
  if (texts[0] !== raw) throw new Error(`artifact ${ids[0]} does not recover the input exactly`);
  return ids;
}
