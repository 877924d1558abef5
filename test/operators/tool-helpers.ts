/** Shared helpers for the tool-stream operator tests (real git, fixtures, recovery checks). */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { firstValueFrom, from, toArray, type OperatorFunction } from 'rxjs';
import { referencedArtifacts } from '../../src/receipts/index.js';
import { createStep, type Step, type StepContext, type ToolResult } from '../../src/step.js';
import { readArtifact } from '../../src/compact/receipt.js';
import type { Vault } from '../../src/vault/types.js';

export const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), '../fixtures/terminal');
export const fixture = (name: string): string => readFileSync(join(FIXTURES, name), 'utf8');

/** facts §4 case 2: 12,000 search lines, no trailing newline. */
export const nativeSearchFixture = (): string =>
  Array.from({ length: 12000 }, (_, i) => `src/module_${i % 40}.py:${i}: repeated match payload value=${i % 7}`).join('\n');

export const CASE1_COMMAND = 'git diff --no-color -- benchmark_fixture.txt';

/** facts §4 case 1: the same 8,000-line change in a real temp git repo; returns the real diff. */
export function case1GitDiff(root = mkdtempSync(join(tmpdir(), 'tt-case1-'))): { cwd: string; diff: string } {
  const git = (...args: string[]): string => execFileSync('git', args, { cwd: root, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  git('init', '-q');
  git('config', 'user.email', 'bench@example.com');
  git('config', 'user.name', 'Bench');
  const file = join(root, 'benchmark_fixture.txt');
  writeFileSync(file, Array.from({ length: 8000 }, (_, i) => `original value ${String(i).padStart(5, '0')}\n`).join(''));
  git('add', 'benchmark_fixture.txt');
  git('commit', '-qm', 'fixture');
  writeFileSync(file, Array.from({ length: 8000 }, (_, i) => `changed value ${String(i).padStart(5, '0')}: repeated diagnostic evidence ${i % 11}\n`).join(''));
  return { cwd: root, diff: git('diff', '--no-color', '--', 'benchmark_fixture.txt') };
}

export const result = (name: string, content: string, args: Record<string, unknown> = {}, exitCode?: number): ToolResult =>
  exitCode === undefined ? { callId: `call-${name}`, name, args, content } : { callId: `call-${name}`, name, args, content, exitCode };

export function runOp(op: OperatorFunction<Step<ToolResult>, Step<ToolResult>>, results: readonly ToolResult[], context: StepContext = { sessionId: 's1' }): Promise<Step<ToolResult>[]> {
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
