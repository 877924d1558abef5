/**
 * Issue 14 item 3: a full vault must not disable the library for good. Before, everything a
 * receipt named stayed pinned forever, so once a bounded vault filled with delivered evidence
 * every later output failed open with E_VAULT_CAPACITY, permanently. Now a session's pins are
 * released when the host ends it (or after the session TTL) and retention prunes what only ended
 * sessions held, oldest first. Through the assembled Terminator, as a host drives it: many
 * sessions one after the other on a vault that holds a handful of their outputs, each ended when
 * done, and one session kept live from the start to the end. No clock is involved (`endSession`).
 */
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createTerminator } from '../../src/runtime/index.js';
import type { ToolResult } from '../../src/step.js';
import { idMatches, receiptIds, recoverViaTool, tempDir } from './harness.js';

const { dir, cleanup } = tempDir('tt-capacity-');
afterAll(cleanup);

const CAPACITY = 400_000;
/** ≈ 40 kB each: the vault holds about nine of them. */
const output = (tag: string): ToolResult => ({
  callId: `c-${tag}`,
  name: 'search_files',
  args: { pattern: tag },
  content: Array.from(
    { length: 600 },
    (_, i) => `src/${tag}/file_${i}.ts:${i + 1}: const ${tag}_${i} = lookup(${i});`,
  ).join('\n'),
});

describe('a bounded vault that fills with delivered evidence', () => {
  it('keeps reducing session after session once ended sessions release their pins; a live session keeps its receipts', async () => {
    const tt = await createTerminator({
      env: {},
      overrides: { dbPath: join(dir, 'vault.sqlite3'), vaultMaxBytes: CAPACITY, minArtifactChars: 4000 },
      ledger: false,
    });
    try {
      const kept = await tt.reduceToolResult(output('kept'), { sessionId: 'live' });
      const [keptId] = receiptIds(kept.value.content);
      expect(keptId, 'the live session got a receipt').toBeDefined();
      const refused: string[] = [];
      const SESSIONS = 40; // ≈ 1.6 MB of delivered evidence through a 400 kB vault
      for (let k = 0; k < SESSIONS; k++) {
        const sessionId = `s${k}`;
        const out = await tt.reduceToolResult(output(`t${k}`), { sessionId });
        const failed = out.decisions.filter((d) => d.kind === 'failed_open');
        if (failed.length > 0) refused.push(`${sessionId}: ${failed.map((d) => d.error).join(', ')}`);
        for (const id of receiptIds(out.value.content)) {
          const got = await recoverViaTool(tt.recoveryTool, sessionId, id);
          expect(got.content !== undefined && idMatches(id, got.content), `${sessionId}: its receipt recovers`).toBe(
            true,
          );
        }
        await tt.endSession?.({ sessionId });
      }
      expect(refused, 'no output failed open once the vault was full').toEqual([]);
      const usage = await tt.vault.usage();
      expect(usage.bytes).toBeLessThanOrEqual(CAPACITY);
      expect(usage.prunedArtifacts).toBeGreaterThan(0);
      const got = await recoverViaTool(tt.recoveryTool, 'live', keptId!);
      expect(
        got.content !== undefined && idMatches(keptId!, got.content),
        'the live session still recovers its first receipt',
      ).toBe(true);
    } finally {
      await tt.close();
    }
  });
});
