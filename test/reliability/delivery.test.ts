/**
 * Issue 14 item 1: delivery is the commit point. Another process's retention prunes an artifact
 * between the moment a stage vaulted it and the moment its receipt would leave — deterministically:
 * the vault handed to the Terminator asks a second process (fixtures/reliability/pruner.ts, its own
 * connection to the same file) to prune every artifact right before its first delivery. Before,
 * the request stages pinned silently (a pruned id was skipped) and sent the receipt anyway, then
 * re-sent it from their memo on every later request. Now the delivery transaction reports it
 * missing, the stage falls back to the content the request still has (or vaults it again), and no
 * receipt that reaches the host points at nothing. Also: receipts memoized in a session whose
 * pins were released elsewhere are delivered again before reuse, and after the vault file is
 * damaged under an open vault the duplicate collapse stops handing out receipts.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { createTerminator, type Terminator } from '../../src/runtime/index.js';
import type { ProviderRequest } from '../../src/step.js';
import { createVault } from '../../src/vault/index.js';
import type { PutInput, StoreScope, Vault } from '../../src/vault/types.js';
import { buildWorkload } from '../fixtures/reliability/workload.js';
import {
  corruptUnderOpenVault,
  checkResults,
  firstLine,
  receiptIds,
  recoverViaTool,
  RTK_STUB,
  runWorkload,
  startScript,
  tempDir,
} from './harness.js';

const { dir, cleanup } = tempDir('tt-delivery-');
afterAll(cleanup);

const CAPACITY = 1_000_000;

/** A line-driven conversation with the pruner child. */
async function startPruner(path: string, ttlMs = 21_600_000) {
  const child = startScript('pruner.ts', [path, String(CAPACITY), String(ttlMs)]);
  expect(await firstLine(child)).toBe('ready');
  let buffer = '';
  const waiting: ((line: string) => void)[] = [];
  child.stdout!.on('data', (d: string) => {
    buffer += d;
    for (let nl = buffer.indexOf('\n'); nl >= 0; nl = buffer.indexOf('\n')) {
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      waiting.shift()?.(line);
    }
  });
  const ask = (line: string): Promise<string> =>
    new Promise((resolve) => {
      waiting.push(resolve);
      child.stdin!.write(`${line}\n`);
    });
  const exit = (): Promise<void> =>
    new Promise((resolve) => {
      if (child.exitCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.stdin!.end('exit\n');
    });
  return { ask, exit };
}

/**
 * The vault a Terminator gets: right before the first delivery of a newly written artifact, the
 * other process prunes it (each id at most twice, so both the tool stage and a request stage that
 * vaults the same content again meet the race, and a third write goes through).
 */
function racing(vault: Vault, ask: (line: string) => Promise<string>, counts: { pruned: number }): Vault {
  const fresh = new Set<string>();
  const races = new Map<string, number>();
  const raceFresh = async (ids: readonly string[]): Promise<void> => {
    for (const id of ids) {
      if (!fresh.delete(id) || (races.get(id) ?? 0) >= 2) continue;
      races.set(id, (races.get(id) ?? 0) + 1);
      if ((await ask(`prune ${id}`)).startsWith('pruned')) counts.pruned++;
    }
  };
  return Object.assign(Object.create(vault) as Vault, {
    put: async (input: PutInput, scope?: StoreScope) => {
      const result = await vault.put(input, scope);
      if (result.created) fresh.add(result.artifactId);
      return result;
    },
    deliver: async (ids: readonly string[], scope?: StoreScope) => {
      await raceFresh(ids);
      return vault.deliver(ids, scope);
    },
    pin: async (ids: readonly string[], scope?: StoreScope) => {
      await raceFresh(ids);
      return vault.pin(ids, scope);
    },
  });
}

const overrides = (path: string) => ({
  dbPath: path,
  rtkPath: RTK_STUB,
  vaultMaxBytes: CAPACITY,
  minArtifactChars: 4000,
  contextBlockTurns: 0,
});

describe('delivery is the commit point (two processes on one vault)', () => {
  it('no receipt reaches the host for an artifact another process pruned before its delivery', async () => {
    const path = join(dir, 'race.sqlite3');
    const vault = await createVault({ path, maxBytes: CAPACITY, highWaterPct: 90, lowWaterPct: 80 });
    const pruner = await startPruner(path);
    const counts = { pruned: 0 };
    const tt = await createTerminator({
      env: {},
      overrides: overrides(path),
      vault: racing(vault, pruner.ask, counts),
      ledger: false,
    });
    try {
      const reports = [];
      for (let v = 0; v < 2; v++) {
        const w = buildWorkload({ id: `race-${v}`, variant: 40 + v });
        const results = await runWorkload(tt, w);
        reports.push({
          w,
          results,
          report: await checkResults(results, (id) => recoverViaTool(tt.recoveryTool, w.id, id)),
        });
        await tt.endSession?.({ sessionId: w.id });
      }
      expect(counts.pruned).toBeGreaterThanOrEqual(4); // the race really happened
      for (const { w, report } of reports) expect(report.problems, w.id).toEqual([]);
      // The request stages still reduced: a vaulted-again artifact was delivered on the second try.
      const requestReceipts = reports.flatMap(({ results }) =>
        results.filter((r) => r.kind === 'request').flatMap((r) => receiptIds(r.output?.value)),
      );
      expect(requestReceipts.length).toBeGreaterThan(0);
    } finally {
      await tt.close();
      await vault.close();
      await pruner.exit();
    }
  }, 240_000);

  it('receipts memoized by a session whose pins another process released are delivered again before reuse', async () => {
    const path = join(dir, 'released.sqlite3');
    const vault = await createVault({ path, maxBytes: CAPACITY, highWaterPct: 90, lowWaterPct: 80 });
    const pruner = await startPruner(path);
    const tt = await createTerminator({ env: {}, overrides: overrides(path), vault, ledger: false });
    try {
      // The file read twice stays under the tool stage's read threshold: both reads are shown whole
      // and the request stage collapses the duplicate into a receipt it memoizes (at the default
      // size each read gets the tool stage's bounded view, and the request stages memoize nothing).
      const w = buildWorkload({ id: 'released', variant: 50, fileRules: 100 });
      const first = await runWorkload(tt, w);
      const firstReport = await checkResults(first, (id) => recoverViaTool(tt.recoveryTool, w.id, id));
      expect(firstReport.problems).toEqual([]);
      expect(firstReport.receipts.length).toBeGreaterThan(0);
      // The path under test: receipts the request stages introduced (and memoized) in the first run.
      const memoized = first
        .filter((r) => r.kind === 'request')
        .flatMap((r) => {
          const before = new Set(receiptIds(r.input));
          return receiptIds(r.output?.value).filter((id) => !before.has(id));
        });
      expect(memoized.length).toBeGreaterThan(0);
      // Another process (another replica of the host, say) ends the session and its retention
      // releases the pins and prunes everything the session was delivered.
      expect(await pruner.ask(`close - ${w.id}`)).toBe('closed');
      // (Terminal baselines protect their artifact until unused for the TTL, whatever the session does.)
      const raw = new Database(path, { readonly: true });
      const baselines = new Set(raw.prepare('SELECT artifact_id FROM terminal_baselines').pluck().all() as string[]);
      raw.close();
      const released = firstReport.receipts.filter((id) => !baselines.has(id));
      expect(released.length).toBeGreaterThan(0);
      for (const id of released) expect(await pruner.ask(`squeeze ${id}`)).toBe(`pruned ${id}`);
      // The same requests come again in this process: the request stages' memo must not hand out
      // those receipts again (receipts the host's own transcript carries are the host's).
      let introduced = 0;
      for (const r of first.filter((x) => x.kind === 'request')) {
        const input = r.input as ProviderRequest;
        const out = await tt.reduceRequest(input, { sessionId: w.id, requestId: `again-${introduced}` });
        const before = new Set(receiptIds(input));
        for (const id of receiptIds(out.value).filter((x) => !before.has(x))) {
          introduced++;
          const got = await recoverViaTool(tt.recoveryTool, w.id, id);
          expect(got.error, `receipt ${id} handed out again`).toBeUndefined();
        }
      }
      expect(introduced).toBeGreaterThan(0);
    } finally {
      await tt.close();
      await vault.close();
      await pruner.exit();
    }
  }, 240_000);

  it('after the vault file is damaged under an open vault, the duplicate collapse hands out no receipt', async () => {
    const path = join(dir, 'damaged.sqlite3');
    const tt: Terminator = await createTerminator({
      env: {},
      overrides: { ...overrides(path), vaultMaxBytes: 64 * 1024 * 1024 },
      ledger: false,
    });
    const big = `${'duplicate evidence line, the same in both copies\n'.repeat(300)}`;
    const request = (turn: number): ProviderRequest => ({
      model: 'gpt-4o',
      messages: [
        { role: 'system', content: 'You are a coding agent.' },
        { role: 'user', content: 'read the file twice' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'c1', type: 'function', function: { name: 'read_file', arguments: '{"path":"a"}' } },
            { id: 'c2', type: 'function', function: { name: 'read_file', arguments: '{"path":"a"}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'c1', content: big },
        { role: 'tool', tool_call_id: 'c2', content: big },
        ...Array.from({ length: turn }, (_, i) => [
          { role: 'assistant', content: `turn ${i}` },
          { role: 'user', content: `go on ${i}` },
        ]).flat(),
      ],
    });
    try {
      const first = await tt.reduceRequest(request(0), { sessionId: 'dup', requestId: 'r0' });
      expect(receiptIds(first.value).length).toBeGreaterThan(0); // the earlier copy became a receipt
      corruptUnderOpenVault(path);
      let receipts = 0;
      for (let t = 1; t <= 10; t++) {
        const out = await tt.reduceRequest(request(t), { sessionId: 'dup', requestId: `r${t}` });
        receipts += receiptIds(out.value).length;
      }
      expect(receipts).toBe(0);
      expect(tt.vault.health().state).toBe('corrupt');
    } finally {
      await tt.close();
    }
  });
});
