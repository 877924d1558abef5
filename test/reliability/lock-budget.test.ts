/**
 * Issue 14 item 6: a held lock stalls a call for at most one busy timeout, and never the host.
 * Before, the busy timeout applied to every vault write and better-sqlite3 waited for the lock
 * synchronously: one `reduceToolResult` blocked the whole process for 20 s (two writes × 10 s)
 * and the host managed one turn in 30 s. Now one budget covers every write of a facade call, and
 * waiting for the lock is a timer between attempts, so the event loop keeps turning meanwhile.
 * Shown with a real second process holding BEGIN EXCLUSIVE; nothing here depends on timing: the
 * event loop's turns are counted, and the lock waiting is the budget's own account.
 */
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createTerminator } from '../../src/runtime/index.js';
import type { LockBudget } from '../../src/vault/types.js';
import type { ProviderRequest, ToolResult } from '../../src/step.js';
import { firstLine, RTK_STUB, startScript, tempDir, withoutCaps } from './harness.js';

const { dir, cleanup } = tempDir('tt-lock-budget-');
afterAll(cleanup);

const BUDGET_MS = 600;

/**
 * Run the host's event loop beside `work`: count its turns (setImmediate callbacks) until `work`
 * settles, and the distinct amounts of lock waiting the budget showed at those turns. A turn that
 * sees the wait half-way is a turn the host got while the call was waiting for the lock.
 */
async function turnsDuring<T>(
  work: Promise<T>,
  budget: LockBudget,
): Promise<{ value: T; turns: number; waitsSeen: number }> {
  let turns = 0;
  let running = true;
  const seen = new Set<number>();
  const tick = (): void => {
    if (!running) return;
    turns++;
    const waited = budget.waitedMs ?? 0;
    if (waited > 0 && waited < BUDGET_MS) seen.add(waited);
    setImmediate(tick);
  };
  setImmediate(tick);
  try {
    return { value: await work, turns, waitsSeen: seen.size };
  } finally {
    running = false;
  }
}

describe('one lock budget per call (a second process holds the write lock)', () => {
  it('every write of a call draws from one budget, and the host keeps running while it waits', async () => {
    const db = join(dir, 'vault.sqlite3');
    const tt = await createTerminator({
      env: {},
      overrides: { dbPath: db, rtkPath: RTK_STUB, busyTimeoutMs: BUDGET_MS },
      ledger: false,
    });
    const log = Array.from({ length: 600 }, (_, i) =>
      i % 50 === 7
        ? `FAILED tests/test_mod.py::test_${i} - AssertionError: expected ${i}`
        : `tests/test_mod.py::test_${i} PASSED`,
    ).join('\n');
    const result: ToolResult = { callId: 'c1', name: 'terminal', args: { command: 'pytest -q' }, content: log };
    // Warm up first (encoder, statements, JIT): the turns counted below are those of the waiting.
    await tt.reduceToolResult(
      { ...result, callId: 'warm', args: { command: 'pytest -q tests/warm' }, content: `${log}\nwarm-up` },
      { sessionId: 'warm' },
    );
    const holder = startScript('lock-holder.ts', [db]);
    try {
      expect(await firstLine(holder)).toBe('ready');
      const budget: LockBudget = { remainingMs: BUDGET_MS, waitedMs: 0 };
      const { value: step, waitsSeen } = await turnsDuring(
        tt.reduceToolResult(result, { sessionId: 's', lockBudget: budget }),
        budget,
      );
      expect(step.value).toBe(result); // failed open: the original passes through
      const failed = step.decisions.filter((d) => d.kind === 'failed_open');
      expect(failed.length).toBeGreaterThanOrEqual(2); // temporal delta and compress both needed a write
      for (const d of failed) expect(d.error).toMatch(/SQLITE_BUSY/);
      // Waiting did not block the process: its event loop went on turning while the call waited
      // (a synchronous busy wait gives it no turn until the wait is over).
      expect(waitsSeen).toBeGreaterThan(5);
      // Both stages together waited one budget, not one each.
      expect(budget.waitedMs).toBe(BUDGET_MS);
      expect(budget.remainingMs).toBe(0);

      // The same for a request: the facade gives the call one budget, shared by every stage.
      const big = 'the same long file content, line by line\n'.repeat(400);
      const request: ProviderRequest = {
        model: 'gpt-4o',
        messages: [
          { role: 'user', content: 'read it twice' },
          {
            role: 'assistant',
            content: null,
            tool_calls: ['r1', 'r2'].map((id) => ({
              id,
              type: 'function',
              function: { name: 'read_file', arguments: '{"path":"f"}' },
            })),
          },
          { role: 'tool', tool_call_id: 'r1', content: big },
          { role: 'tool', tool_call_id: 'r2', content: big },
        ],
      };
      const requestBudget: LockBudget = { remainingMs: BUDGET_MS, waitedMs: 0 };
      const compiled = await turnsDuring(
        tt.reduceRequest(request, { sessionId: 's', lockBudget: requestBudget }),
        requestBudget,
      );
      // Nothing could be vaulted, so nothing was reduced; the budget was spent once for the call.
      expect(withoutCaps(compiled.value.value)).toEqual(request);
      expect(requestBudget.waitedMs).toBe(BUDGET_MS);
      expect(compiled.waitsSeen).toBeGreaterThan(5);
    } finally {
      const exited = new Promise((r) => holder.once('exit', r));
      holder.stdin?.end();
      await exited;
      await tt.close();
    }
  });
});
