/**
 * One pass per tool result: reduceToolResult vaults the exact text once, and the delta's bar is
 * the view its compact candidate would really show.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compressToolResult, type CompressToolResultOptions } from '../../operators/compress-tool-result.js';
import { deltaRepeatedOutput } from '../../operators/delta-repeated-output.js';
import { codePoints } from '../../src/measure/index.js';
import { reduceToolResult, type ReduceToolResultOptions } from '../../operators/reduce-tool-result.js';
import { readArtifact } from '../../src/testing/properties/recovers-exactly.js';
import { referencedArtifacts } from '../../src/receipts/index.js';
import type { ToolResult } from '../../src/step.js';
import { deepFreeze, faultyVault } from '../../src/testing/index.js';
import { createVault } from '../../src/vault/index.js';
import type { Vault } from '../../src/vault/types.js';
import { result, runOp } from './tool-helpers.js';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'tt-one-pass-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let nth = 0;
const freshVault = (): Promise<Vault> => createVault({ path: join(dir, `v${(nth += 1)}.sqlite3`) });

// 300 lines that do not factor; every tenth one names `needle_<i>` (a focus term's lines).
const listing = (changed = 0, tag = 'x'): string =>
  Array.from({ length: 300 }, (_, i) =>
    i >= 100 && i < 100 + changed
      ? `CHANGED ${tag} line ${i} now reads differently from before (${(i * 31) % 977})`
      : `-rw-r--r-- 1 dev staff ${(i * 7919) % 100000} Mar ${1 + (i % 28)} file_${i.toString(36)}${i % 10 === 5 ? `_needle_${i}` : ''}.txt`,
  ).join('\n');
const ls = (content: string): ToolResult =>
  deepFreeze(result('terminal', content, { command: 'ls -l /srv/data', cwd: '/srv' }));

describe('one pass per tool result', () => {
  it('vaults the exact text of each result once and renders its view once (it was twice: delta, then compression)', async () => {
    const vault = await freshVault();
    const counted = faultyVault(vault, { failOn: [] });
    let rendered = 0; // the view asks for its focus terms once per rendering
    const options: ReduceToolResultOptions = {
      vault: counted,
      terminalMinChars: 1000,
      focus: () => {
        rendered += 1;
        return [];
      },
    };
    const first = listing();
    const unrelated = first.split('\n').reverse().join('\n'); // a diff larger than the view: the view is shown
    const inputs = [ls(first), ls(unrelated), ls(unrelated)];
    const outs = await runOp(reduceToolResult(options), inputs, { sessionId: 'once' });
    expect(outs.map((o) => o.decisions.map((d) => `${d.stage}:${d.kind}:${d.reason}`))).toEqual([
      ['deltaRepeatedOutput:skipped:baseline', 'compressToolResult:applied:terminal_compacted'],
      ['deltaRepeatedOutput:skipped:not_smaller', 'compressToolResult:applied:terminal_compacted'],
      ['deltaRepeatedOutput:applied:unchanged'],
    ]);
    // One put (and one read-back) per result, one view per result: the delta's bar and the candidate.
    expect(counted.faultLog.calls.put ?? 0).toBe(3);
    expect(counted.faultLog.calls.verify ?? 0).toBe(3);
    expect(rendered).toBe(3);
    for (const [i, out] of outs.entries()) {
      const ids = referencedArtifacts(out.value.content);
      expect(ids.length).toBeGreaterThan(0);
      expect(await readArtifact(vault, ids[0]!)).toBe(inputs[i]!.content);
      // Decisions carry no hidden hand-off: what they enumerate is all they hold.
      for (const d of out.decisions) expect(Object.getOwnPropertyNames(d)).toEqual(Object.keys(d));
    }
    // The compact preset alone shows the same view as the stage with both candidates.
    const alone = await runOp(compressToolResult({ vault, terminalMinChars: 1000 }), [ls(first)], { sessionId: 'a' });
    const both = await runOp(reduceToolResult({ vault, terminalMinChars: 1000 }), [ls(first)], { sessionId: 'b' });
    expect(both[0]!.value.content).toBe(alone[0]!.value.content);
    await vault.close();
  });

  it("given compression's options, the delta beats exactly the view compression would show (focus lines, note, eligibility)", async () => {
    const vault = await freshVault();
    const focus = (): readonly string[] => Array.from({ length: 30 }, (_, j) => `needle_${10 * j + 5}`);
    const compression: ReduceToolResultOptions = { vault, terminalMinChars: 1000, focus };
    // A compression that shows nothing: the delta alone against the raw output, i.e. the candidate itself.
    const never: CompressToolResultOptions = { vault, terminalMinChars: 10_000_000 };
    let differsFromOldBar = 0;
    let deltas = 0;
    for (let changed = 4; changed <= 80; changed += 4) {
      const inputs = [ls(listing()), ls(listing(changed, String(changed)))];
      const session = (what: string) => ({ sessionId: `${what}-${changed}` });
      const composed = await runOp(reduceToolResult(compression), inputs, session('composed'));
      const [, shown] = await runOp(compressToolResult(compression), inputs, session('shown'));
      const [, candidate] = await runOp(deltaRepeatedOutput({ vault, compression: never }), inputs, session('cand'));
      const [, oldBar] = await runOp(
        (s) => s.pipe(deltaRepeatedOutput({ vault }), compressToolResult(compression)),
        inputs,
        session('old'),
      );
      const view = shown!.value.content;
      const diff = candidate!.value.content;
      expect(view).not.toBe(inputs[1]!.content); // compression would compact it
      expect(diff.startsWith('[Token Terminator temporal delta | ')).toBe(true);
      const wins = codePoints(diff) < codePoints(view);
      // The composed pass shows the delta exactly when it is smaller than compression's own view.
      expect(composed[1]!.value.content).toBe(wins ? diff : view);
      if (wins) deltas += 1;
      if (oldBar!.value.content !== composed[1]!.value.content) differsFromOldBar += 1;
    }
    // Not vacuous: both outcomes occur, and the old bar (compaction without focus lines) decided otherwise somewhere.
    expect(deltas).toBeGreaterThan(0);
    expect(deltas).toBeLessThan(20);
    expect(differsFromOldBar).toBeGreaterThan(0);
    await vault.close();
  });

  it('a result compression would leave alone (a backend it does not serve) is delta-compared against the raw output', async () => {
    const vault = await freshVault();
    const env = { TERMINAL_ENV: 'docker' };
    const compression: ReduceToolResultOptions = { vault, terminalMinChars: 1000, env };
    const inputs = [ls(listing()), ls(listing(60, 'docker'))];
    const [, today] = await runOp(
      (s) => s.pipe(deltaRepeatedOutput({ vault, env }), compressToolResult(compression)),
      inputs,
      { sessionId: 'old' },
    );
    const [, composed] = await runOp(reduceToolResult(compression), inputs, { sessionId: 'new' });
    // Without compression's options the delta lost to a compaction nobody showed: the raw output went through.
    expect(today!.value.content).toBe(inputs[1]!.content);
    expect(composed!.value.content.startsWith('[Token Terminator temporal delta | ')).toBe(true);
    expect(codePoints(composed!.value.content)).toBeLessThan(codePoints(inputs[1]!.content));
    await vault.close();
  });

  it("records the single put under the host's tool name, which a search by that name finds", async () => {
    const vault = await freshVault();
    const compression: ReduceToolResultOptions = { vault, terminalMinChars: 1000 };
    const bash = (content: string): ToolResult =>
      deepFreeze(result('bash', content, { command: 'ls -l /srv/data', cwd: '/srv' }));
    const [first] = await runOp(reduceToolResult(compression), [bash(listing())], { sessionId: 'host-name' });
    const [id] = referencedArtifacts(first!.value.content);
    expect(id).toBeDefined();
    const found = await vault.search('bash', 10);
    expect(found.map((a) => [a.artifactId, a.toolName])).toEqual([[id, 'bash']]);
    await vault.close();
  });
});
