/**
 * `npm run bench -- search [--mb N]`: how long a recovery search can block the event loop
 * (better-sqlite3 runs each statement synchronously on it). A SQLite vault on a temp file gets
 * `--mb` (30) MB of new artifacts, queued for the search index (indexing off the put path); then:
 *
 * 1. the first search after those writes (it indexes the queue in steps, then answers);
 * 2. a 2,000-character query over a 2,000,000-character artifact of a repeated pattern (the
 *    worst case of a trigram phrase: every position matches its first trigrams);
 * 3. a two-character query (too short for the index: a scan of everything).
 *
 * For each: wall time, the longest gap between two turns of the event loop (a setImmediate
 * ticker beside the search), the turns, and `partial`. Baseline in the same run: the one
 * statement an unbounded search would run for case 2 (the whole query as an FTS5 phrase), timed
 * the same way. Timings depend on the machine; the longest block is the figure to compare.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import Database from 'better-sqlite3';
import { createVault } from '../src/vault/index.js';

function flag(argv: readonly string[], name: string, fallback: number): number {
  const i = argv.indexOf(name);
  const v = i >= 0 ? Number(argv[i + 1]) : NaN;
  return Number.isFinite(v) && v > 0 ? v : fallback;
}

async function blocking<T>(
  work: () => Promise<T> | T,
): Promise<{ value: T; wallMs: number; longestMs: number; turns: number }> {
  let last = performance.now();
  let longest = 0;
  let turns = 0;
  let running = true;
  const tick = (): void => {
    if (!running) return;
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
    turns++;
    setImmediate(tick);
  };
  setImmediate(tick);
  const t0 = performance.now();
  const value = await work();
  const end = performance.now();
  running = false;
  return { value, wallMs: end - t0, longestMs: Math.max(longest, end - last), turns };
}

const fmt = (r: { wallMs: number; longestMs: number; turns: number }): string =>
  `wall ${r.wallMs.toFixed(0)} ms, longest event-loop block ${r.longestMs.toFixed(0)} ms, ${r.turns} turns`;

export async function main(argv: string[]): Promise<void> {
  const mb = flag(argv, '--mb', 30);
  const dir = mkdtempSync(join(tmpdir(), 'tt-bench-search-'));
  try {
    const path = join(dir, 'vault.sqlite3');
    const vault = await createVault({ path, indexInBackground: false, maxBytes: 1024 * 1024 * 1024 });
    const pattern = 'ab'.repeat(995_000);
    const { artifactId } = await vault.put({ content: pattern });
    for (let i = 0; vault && i < Math.round(mb / 2); i++) {
      const lines = Array.from(
        { length: 26_000 },
        (_, k) => `artifact ${i} line ${k}: status=ok value=${(k * 7919 + i) % 100_003} path=src/mod_${k % 97}.ts`,
      );
      await vault.put({ content: lines.join('\n'), toolName: 'terminal' });
    }
    console.log(
      `search bench: SQLite vault with ${mb} MB queued for indexing plus one 2,000,000-char artifact ('abab…'); deadline ${2000} ms`,
    );
    const first = await blocking(() => vault.search('artifact 3 line 25999'));
    console.log(
      `  first search after the writes: ${first.value.length} result(s), partial ${first.value.partial}; ${fmt(first)}`,
    );
    await vault.search('drain the rest'); // whatever the first one left queued
    const longQuery = `${'ab'.repeat(999)}c`;
    const long = await blocking(() => vault.search(longQuery));
    console.log(
      `  2,000-char query over the 2M-char artifact: ${long.value.length} result(s), partial ${long.value.partial}; ${fmt(long)}`,
    );
    const short = await blocking(() => vault.search('zq'));
    console.log(
      `  2-char query (a scan of ${mb} MB): ${short.value.length} result(s), partial ${short.value.partial}; ${fmt(short)}`,
    );
    await vault.close();
    // Baseline: the single statement an unbounded search would run for the long query.
    const raw = new Database(path, { readonly: true });
    const phrase = `"${longQuery.replace(/"/g, '""')}"`;
    const base = await blocking(() =>
      raw.prepare('SELECT rowid FROM artifact_fts WHERE artifact_fts MATCH ?').all(phrase),
    );
    raw.close();
    console.log(
      `  baseline, the whole query as one FTS5 phrase in one statement: ${fmt(base)} (${(base.longestMs / Math.max(1, long.longestMs)).toFixed(0)}× the bounded search's longest block)`,
    );
    void artifactId;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
