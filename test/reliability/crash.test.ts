/**
 * Crashes (issue 8, item 5): `token-terminator replay --db <file> --dump <file>` is SIGKILLed 20
 * times at random points (two processes at a time on one vault file). What "written before the
 * kill" can be observed as: the complete lines of the dump, each the final request the host would
 * have sent. After every kill `PRAGMA integrity_check` is ok and every receipt in those lines
 * recovers exactly; at the end all of them still do and a full replay on the same file succeeds.
 *
 * No timer decides when to kill (issue 14, item 8): the kill is sent the moment the replay's own
 * progress marker — `delivered <n>` on its stdout, written synchronously per request — reaches a
 * seeded count in the first third of the workload, so two thirds of the work is still ahead and the kill lands somewhere inside
 * the next request, wherever it happens to be. A replay that finishes first fails the test with a
 * message saying so.
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
import { CLI, fixture, idMatches, receiptIds, repoRoot, runToEnd, tempDir } from './harness.js';

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

/**
 * Start a replay (test/fixtures/reliability/replay-worker.ts: the replay of `token-terminator
 * replay --db --dump`, printing `delivered <n>` synchronously after each request) and SIGKILL it
 * the moment it reports `afterRequests` delivered requests.
 */
function replayAndKill(
  db: string,
  sessions: string,
  dump: string,
  afterRequests: number,
): Promise<Killed & { readonly deliveredAtKill: number; readonly lastDelivered: number; readonly finished: boolean }> {
  const child = spawn(process.execPath, ['--import', 'tsx', fixture('replay-worker.ts'), sessions, db, dump], {
    cwd: repoRoot,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  let buffer = '';
  let deliveredAtKill = -1;
  let lastDelivered = 0;
  let finished = false;
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    buffer += chunk;
    const lines = buffer.split('\n');
    buffer = lines.pop() ?? '';
    for (const line of lines) {
      if (line === 'finished') finished = true;
      const n = /^delivered (\d+)$/.exec(line);
      if (n !== null) lastDelivered = Number(n[1]);
      if (n !== null && deliveredAtKill < 0 && Number(n[1]) >= afterRequests) {
        deliveredAtKill = Number(n[1]);
        child.kill('SIGKILL');
      }
    }
  });
  return new Promise((resolvePromise, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) =>
      resolvePromise({ lines: completeLines(dump), signal, code, stderr, deliveredAtKill, lastDelivered, finished }),
    );
  });
}

/** Requests a recorded session produces (one per assistant turn after the first message). */
const requestsOf = (messages: readonly Readonly<Record<string, unknown>>[]): number =>
  messages.filter((m, i) => i > 0 && m['role'] === 'assistant').length;

async function recoversExactly(vault: Vault, id: string): Promise<boolean> {
  const parts: string[] = [];
  try {
    for (let offset: number | null = 0; offset !== null;) {
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
        const workload = [
          buildWorkload({ id: `crash-${n}a`, variant: n % 5, fillerTurns: 8 }),
          buildWorkload({ id: `crash-${n}b`, variant: (n + 1) % 5, fillerTurns: 8 }),
        ];
        writeSessions(sessions, workload);
        const total = workload.reduce((t, w) => t + requestsOf(w.messages), 0);
        // Kill points: after 1 … total/3 delivered requests, then wherever the next request is
        // (vault writes, leases, pins, metrics, dump write): two thirds of the work is left.
        const after = 1 + Math.floor(random() * Math.floor(total / 3));
        points.push(`${after}/${total}`);
        return replayAndKill(db, sessions, join(dir, `dump-${n}.jsonl`), after).then((r) => ({ ...r, after, total }));
      });
      const results = await Promise.all(runs);
      for (const r of results) {
        expect(r.stderr).toBe('');
        const finishedFirst =
          r.deliveredAtKill < 0
            ? `the replay ended on its own (exit code ${String(r.code)}) before delivering the ${r.after} requests that trigger the kill`
            : `the replay had delivered ${r.lastDelivered} of ${r.total} requests${r.finished ? ' and finished' : ''} before the kill sent at marker ${r.after} took effect: the kill must come while work is left`;
        expect(r.signal, finishedFirst).toBe('SIGKILL');
        expect(r.finished, finishedFirst).toBe(false);
        expect(r.lastDelivered, finishedFirst).toBeLessThan(r.total);
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
    console.log(
      `crashes: ${killed} SIGKILLs (${points.join(', ')}), ${seen.size} receipts written before a kill, all recovered; final replay ${figures.receipts} receipts`,
    );
  }, 600_000);
});
