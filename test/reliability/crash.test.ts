/**
 * Crashes (issue 8, item 5): `token-terminator replay --db <file> --dump <file>` is SIGKILLed 20
 * times at random points (two processes at a time on one vault file). What "written before the
 * kill" can be observed as: the complete lines of the dump, each the final request the host would
 * have sent. After every kill `PRAGMA integrity_check` is ok and every receipt in those lines
 * recovers exactly; at the end all of them still do and a full replay on the same file succeeds.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { prng } from '../../src/testing/arbitraries/text.js';
import { createVault } from '../../src/vault/index.js';
import type { Vault } from '../../src/vault/types.js';
import { buildWorkload, writeSessions } from '../fixtures/reliability/workload.js';
import { CLI, idMatches, receiptIds, repoRoot, runToEnd, tempDir } from './harness.js';

const { dir, cleanup } = tempDir('tt-rel-crash-');
afterAll(cleanup);

const KILLS = 20;
/** Replays killed at the same time (on the same vault file). */
const PARALLEL = 2;

function completeLines(path: string): string[] {
  if (!existsSync(path)) return [];
  const text = readFileSync(path, 'utf8');
  const lines = text.split('\n');
  lines.pop(); // a partial last line was not "written"
  return lines.filter(Boolean);
}

interface Killed {
  readonly lines: string[];
  readonly signal: NodeJS.Signals | null;
  readonly code: number | null;
  readonly stderr: string;
}

/** Start a replay; SIGKILL it `delayMs` after its dump first holds `afterLines` complete lines. */
function replayAndKill(db: string, sessions: string, dump: string, afterLines: number, delayMs: number): Promise<Killed> {
  const child = spawn(process.execPath, [CLI, 'replay', sessions, '--db', db, '--json', '--dump', dump], { cwd: repoRoot, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  let delay: NodeJS.Timeout | undefined;
  const poll = setInterval(() => {
    if (delay === undefined && completeLines(dump).length >= afterLines) delay = setTimeout(() => void child.kill('SIGKILL'), delayMs);
  }, 5);
  return new Promise((resolvePromise, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearInterval(poll);
      clearTimeout(delay);
      resolvePromise({ lines: completeLines(dump), signal, code, stderr });
    });
  });
}

async function recoversExactly(vault: Vault, id: string): Promise<boolean> {
  const parts: string[] = [];
  try {
    for (let offset: number | null = 0; offset !== null; ) {
      const page = await vault.page(id, offset);
      parts.push(page.content);
      offset = page.nextOffset;
    }
  } catch {
    return false;
  }
  return idMatches(id, parts.join(''));
}

describe('replay killed with SIGKILL at random points', () => {
  it(`${KILLS} kills: integrity ok after each, every receipt written before a kill recovers`, async () => {
    const db = join(dir, 'vault.sqlite3');
    const random = prng(0x8_5eed);
    const seen = new Set<string>();
    const points: string[] = [];
    let killed = 0;
    for (let round = 0; round < KILLS / PARALLEL; round++) {
      const runs = Array.from({ length: PARALLEL }, (_, j) => {
        const n = round * PARALLEL + j;
        const sessions = join(dir, `sessions-${n}.jsonl`);
        writeSessions(sessions, [buildWorkload({ id: `crash-${n}a`, variant: n % 5, fillerTurns: 3 }), buildWorkload({ id: `crash-${n}b`, variant: (n + 1) % 5, fillerTurns: 3 })]);
        // Kill points: after 1–14 of 24 delivered requests plus 0–60 ms, i.e. anywhere inside the
        // next request or two (vault writes, leases, pins, metrics, dump write).
        const afterLines = 1 + Math.floor(random() * 14);
        const delayMs = Math.floor(random() * 60);
        points.push(`${afterLines}+${delayMs}ms`);
        return replayAndKill(db, sessions, join(dir, `dump-${n}.jsonl`), afterLines, delayMs);
      });
      const results = await Promise.all(runs);
      for (const r of results) {
        expect(r.stderr).toBe('');
        expect(r.signal).toBe('SIGKILL');
        killed++;
      }
      if (existsSync(db)) {
        const raw = new Database(db);
        expect(raw.pragma('integrity_check', { simple: true })).toBe('ok');
        raw.close();
      }
      const ids = results.flatMap((r) => r.lines.flatMap((l) => receiptIds(JSON.parse(l))));
      if (ids.length > 0) {
        await using vault = await createVault({ path: db });
        for (const id of ids) expect(await recoversExactly(vault, id), `receipt ${id} after round ${round}`).toBe(true);
      }
      for (const id of ids) seen.add(id);
    }
    expect(killed).toBe(KILLS);
    expect(seen.size).toBeGreaterThan(0);

    // After all the kills: every receipt ever written still recovers, and a full replay works.
    await using vault = await createVault({ path: db });
    for (const id of seen) expect(await recoversExactly(vault, id), id).toBe(true);
    const sessions = join(dir, 'sessions-final.jsonl');
    writeSessions(sessions, [buildWorkload({ id: 'after-crashes', variant: 3 })]);
    const final = await runToEnd(process.execPath, [CLI, 'replay', sessions, '--db', db, '--json']);
    expect(final.stderr).toBe('');
    expect(final.code).toBe(0);
    const figures = JSON.parse(final.stdout) as { receipts: number; recovery_failures: number };
    expect(figures.recovery_failures).toBe(0);
    console.log(`crashes: ${killed} SIGKILLs (${points.join(', ')}), ${seen.size} receipts written before a kill, all recovered; final replay ${figures.receipts} receipts`);
  }, 240_000);
});
