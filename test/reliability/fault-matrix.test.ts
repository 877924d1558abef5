/**
 * The fault matrix (issue 8, items 1 and 2): each cell injects one real fault under the assembled
 * pipeline (`createTerminator`), drives the reliability workload through every facade, and checks
 * that nothing threw, every output is its input or a valid smaller value, the fault was recorded
 * as a `failed_open` decision, and every receipt that reached an output recovers exactly through
 * the recovery tool. The matrix (cell → outcome) is printed at the end.
 */
import { execFileSync } from 'node:child_process';
import { closeSync, mkdirSync, openSync, statSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createTerminator, type Terminator } from '../../src/runtime/index.js';
import type { Decision, ToolCall } from '../../src/step.js';
import { throwingCounter } from '../../src/testing/faults.js';
import { VaultOpenError } from '../../src/vault/errors.js';
import { createVault } from '../../src/vault/index.js';
import { TokenizeServer, closedPortUrl } from '../budget/helpers.js';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import pg from 'pg';
import { pgCtl, startCluster, stopCluster, type Cluster } from '../support/postgres.js';
import { buildWorkload } from '../fixtures/reliability/workload.js';
import {
  corruptUnderOpenVault,
  RTK_STUB,
  canChattr,
  canMount,
  checkResults,
  decisionsOf,
  errorLabels,
  firstLine,
  label,
  passedThrough,
  recoverViaTool,
  renderMatrix,
  runToEnd,
  runWorkload,
  stagesWith,
  startScript,
  tempDir,
  fixture,
  type ItemKind,
  type ItemResult,
  type MatrixRow,
} from './harness.js';

const { dir, cleanup } = tempDir('tt-rel-matrix-');
const rows: MatrixRow[] = [];
// 120 rules: the file read twice is 17,870 chars, under the tool stage's read threshold (20,000:
// read_file is shown whole below it) and over the inline limit set below (16,000), so both reads
// reach collapseDuplicates whole and it shows the second as a bounded view.
const workload = buildWorkload({ fileRules: 120 });
let cellNo = 0;

const probe = (name: string): string => {
  const d = join(dir, name);
  mkdirSync(d);
  return d;
};
const mountOk = canMount(probe('probe-mnt'));
const chattrOk = canChattr(probe('probe-attr'));

afterAll(() => {
  console.log(`\n${renderMatrix(`Fault matrix (${rows.length} cells)`, rows)}\n`);
  cleanup();
});

function cellDir(): string {
  const d = join(dir, `cell-${++cellNo}`);
  mkdirSync(d, { mode: 0o700 });
  return d;
}

// The workload is sized so that every stage applies under these thresholds (cache-economic history
// rewrites, 8000-char managed outputs, the 17,870-char file read shown as a bounded view from
// 16,000 chars — read_file and `cat` are shown whole by the tool stage under its 20,000-char read
// threshold —, the skill-routing opt-in so that its stage runs too); pin them so the matrix does
// not drift with the product defaults.
const baseOverrides = {
  rtkPath: RTK_STUB,
  contextBlockTurns: 0,
  minArtifactChars: 8000,
  maxInlineChars: 16_000,
  skillRouting: true,
} as const;

function open(dbPath: string, extra: Parameters<typeof createTerminator>[0] = {}): Promise<Terminator> {
  return createTerminator({ env: {}, ...extra, overrides: { ...baseOverrides, dbPath, ...extra.overrides } });
}

interface Expect {
  /** Streams in which at least one output must carry a failed_open decision. */
  readonly failedOpenIn: readonly ItemKind[];
  /** Streams whose every output must equal its input (requests: without cap fields). */
  readonly passThrough?: readonly ItemKind[];
}

function summary(results: readonly ItemResult[], receipts: number, recovered: number): string {
  const fo = stagesWith(results, 'failed_open');
  const errors = errorLabels(results);
  return `${fo === '' ? 'no failed_open' : `failed_open ${fo} (${errors})`}; passed through ${passedThrough(results)}/${results.length}; receipts ${recovered}/${receipts} recover`;
}

/** Run the workload, lift the fault, check every output and every receipt, record the row. */
async function checkCell(
  cell: string,
  injection: string,
  tt: Terminator,
  expectation: Expect,
  lift?: () => void | Promise<void>,
  recoverFrom?: Terminator,
): Promise<ItemResult[]> {
  const results = await runWorkload(tt, workload);
  await lift?.();
  const from = recoverFrom ?? tt;
  const report = await checkResults(results, (id) => recoverViaTool(from.recoveryTool, workload.id, id));
  rows.push({ cell, injection, outcome: summary(results, report.receipts.length, report.recovered) });
  expect(report.problems).toEqual([]);
  for (const kind of expectation.failedOpenIn) {
    expect(
      decisionsOf(results, kind).some((d) => d.kind === 'failed_open'),
      `a failed_open decision in the ${kind} stream`,
    ).toBe(true);
  }
  for (const kind of expectation.passThrough ?? []) {
    const of = results.filter((r) => r.kind === kind);
    expect(passedThrough(of), `every ${kind} output passed through`).toBe(of.length);
  }
  return results;
}

/** After the fault is lifted the same terminator reduces again (a new session, receipts recover). */
async function checkHealed(tt: Terminator): Promise<number> {
  const w = buildWorkload({ id: `healed-${cellNo}`, variant: 100 + cellNo });
  const results = await runWorkload(tt, w);
  const report = await checkResults(results, (id) => recoverViaTool(tt.recoveryTool, w.id, id));
  expect(report.problems).toEqual([]);
  expect(report.receipts.length).toBeGreaterThan(0);
  return report.receipts.length;
}

/**
 * A vault that cannot be opened, for each path: `vaultErrors: 'throw'` rejects with a
 * VaultOpenError (its reason code is returned); the default comes up in pass-through mode, where
 * the whole workload passes through unchanged with a failed_open decision on every output, status
 * reports the vault unavailable and the recovery tool answers E_VAULT_OPEN.
 */
async function startupCell(
  cell: string,
  injection: string,
  paths: readonly string[],
  overrides: NonNullable<Parameters<typeof createTerminator>[0]>['overrides'] = {},
): Promise<string[]> {
  const reasons: string[] = [];
  const outcomes: string[] = [];
  for (const [i, path] of paths.entries()) {
    const thrown = await open(path, { vaultErrors: 'throw', overrides }).then(
      async (tt) => (await tt.close(), undefined),
      (e: unknown) => e,
    );
    expect(thrown).toBeInstanceOf(VaultOpenError);
    const error = thrown as VaultOpenError;
    expect(error).toMatchObject({ code: 'E_VAULT_OPEN', path });
    reasons.push(error.reason ?? '?');
    await using tt = await open(path, { overrides });
    const w = buildWorkload({ id: `startup-${cellNo}-${i}`, variant: 200 + cellNo });
    const results = await runWorkload(tt, w);
    const report = await checkResults(results, (id) => recoverViaTool(tt.recoveryTool, w.id, id));
    expect(report.problems).toEqual([]);
    expect(passedThrough(results), 'every output passed through').toBe(results.length);
    expect(
      results.every((r) =>
        r.output?.decisions.some((d) => d.kind === 'failed_open' && d.error === 'VaultOpenError:E_VAULT_OPEN'),
      ),
      'a failed_open decision on every output',
    ).toBe(true);
    const status = JSON.parse(await tt.recoveryTool.handle({ action: 'status' }, { sessionId: w.id })) as Record<
      string,
      unknown
    >;
    expect(status).toMatchObject({ vault_available: false, passthrough: true, vault_open_reason: error.reason });
    const get = JSON.parse(
      await tt.recoveryTool.handle({ action: 'artifact_get', artifact_id: `a_${'0'.repeat(32)}` }, { sessionId: w.id }),
    ) as { error?: { code: string } };
    expect(get.error?.code).toBe('E_VAULT_OPEN');
    outcomes.push(
      `${label(error)} (${error.reason}) → ${summary(results, report.receipts.length, report.recovered)}; status vault_available=false; artifact_get → ${get.error?.code}`,
    );
  }
  rows.push({ cell, injection, outcome: `throw: rejects; passthrough (default): ${outcomes.join(' | ')}` });
  return reasons;
}

describe('control: no fault', () => {
  it('applies every stage of both pipelines and every receipt recovers exactly', async () => {
    await using tt = await open(join(cellDir(), 'vault.sqlite3'));
    const results = await checkCell('none (control)', '-', tt, { failedOpenIn: [] });
    const applied = new Set(
      decisionsOf(results)
        .filter((d) => d.kind === 'applied')
        .map((d) => d.stage),
    );
    // The collapseDuplicates operator credits a bounded view (no duplicate) under its own stage id.
    if (applied.has('boundedView')) applied.add('collapseDuplicates');
    for (const stage of [
      'rewriteTerminalCommand',
      'deltaRepeatedOutput',
      'compressToolResult',
      'collapseDuplicates',
      'routeSkills',
      'compileRequest',
      'capOutputBudget',
    ]) {
      expect(applied.has(stage), stage).toBe(true);
    }
    expect(decisionsOf(results).filter((d) => d.kind === 'failed_open')).toEqual([]);
    expect(results.length).toBe(46);
  });
});

describe('vault faults', () => {
  it('vault full: every put refused, results pass through with failed_open', async () => {
    const db = join(cellDir(), 'vault.sqlite3');
    await using tt = await open(db, { overrides: { vaultMaxBytes: 100_000 } });
    // Fill the vault with pinned evidence (never pruned): no new artifact above ~1 KB fits.
    const filler = await tt.vault.put({ content: 'pinned evidence ░\n'.repeat(4990), toolName: 'filler' });
    await tt.vault.pin([filler.artifactId]);
    expect((await tt.vault.usage()).bytes).toBeGreaterThan(99_000);
    const results = await checkCell('vault full (capacity)', 'vaultMaxBytes 100 kB filled with pinned evidence', tt, {
      failedOpenIn: ['tool_result', 'request'],
      passThrough: ['tool_result'],
    });
    expect(errorLabels(results)).toContain('E_VAULT_CAPACITY');
  });

  // Retention pressure is not a fault but the place evidence gets lost: a vault above its high
  // water prunes unprotected artifacts, so every stage must pin what its delivered receipts and
  // notes name. The capacity is sized from a first run so that the session's own evidence alone
  // crosses the high water (≈94 % of capacity): once the older unpinned filler is gone, retention
  // keeps looking for candidates among the session's artifacts, and any unpinned one is pruned.
  it('retention pressure (small vault): unpinned filler is pruned, every delivered receipt still recovers', async () => {
    const probe = await open(join(cellDir(), 'vault.sqlite3'));
    await runWorkload(probe, workload);
    const evidence = (await probe.vault.usage()).bytes;
    await probe.close();
    const cap = Math.floor(evidence / 0.94);
    await using tt = await open(join(cellDir(), 'vault.sqlite3'), { overrides: { vaultMaxBytes: cap } });
    for (let i = 0; i < 4; i++)
      await tt.vault.put({
        content: `older unpinned evidence ${i}\n`.repeat(Math.floor(cap / 12 / 27)),
        toolName: 'filler',
      });
    const results = await runWorkload(tt, workload);
    const report = await checkResults(results, (id) => recoverViaTool(tt.recoveryTool, workload.id, id));
    const usage = await tt.vault.usage();
    rows.push({
      cell: 'retention pressure',
      injection: `vaultMaxBytes ${Math.round(cap / 1000)} kB (session evidence ${Math.round((100 * evidence) / cap)} %) + 4 older unpinned artifacts`,
      outcome: `${summary(results, report.receipts.length, report.recovered)}; pruned ${usage.prunedArtifacts}${report.problems.length > 0 ? ' — EVIDENCE LOST' : ''}`,
    });
    expect(usage.prunedArtifacts).toBeGreaterThanOrEqual(4);
    expect(decisionsOf(results).filter((d) => d.kind === 'failed_open')).toEqual([]);
    expect(report.receipts.length).toBeGreaterThan(0);
    expect(report.recovered).toBe(report.receipts.length);
    expect(report.problems).toEqual([]);
  });

  it('vault locked by another process beyond the busy timeout: fail open, then heals', async () => {
    const db = join(cellDir(), 'vault.sqlite3');
    await using tt = await open(db, { overrides: { busyTimeoutMs: 50 } });
    const holder = startScript('lock-holder.ts', [db]);
    expect(await firstLine(holder)).toBe('ready');
    const release = async (): Promise<void> => {
      const exited = new Promise((r) => holder.once('exit', r));
      holder.stdin?.end();
      await exited;
    };
    try {
      const results = await checkCell(
        'vault locked (other process)',
        'child holds BEGIN EXCLUSIVE; TOKEN_TERMINATOR_BUSY_TIMEOUT_MS 50',
        tt,
        { failedOpenIn: ['tool_result', 'request'], passThrough: ['tool_result'] },
        release,
      );
      expect(errorLabels(results)).toMatch(/SQLITE_BUSY/);
      await checkHealed(tt);
    } finally {
      holder.kill('SIGKILL');
    }
  });

  it('corrupted vault file before open: passes everything through (default), or rejects with VaultOpenError', async () => {
    const d = cellDir();
    const garbage = join(d, 'garbage.sqlite3');
    writeFileSync(garbage, Buffer.from('not a database, just bytes \u0000\u00ff'.repeat(400)), { mode: 0o600 });
    // A real vault whose pages (all but the header page) are overwritten with garbage.
    const db = join(d, 'pages.sqlite3');
    const v = await createVault({ path: db });
    for (let i = 0; i < 8; i++) await v.put({ content: `evidence ${i} `.repeat(2000) });
    await v.close();
    const size = statSync(db).size;
    const fd = openSync(db, 'r+');
    writeSync(fd, Buffer.alloc(size - 4096, 0xa5), 0, size - 4096, 4096);
    closeSync(fd);
    const reasons = await startupCell('corrupted file before open', 'garbage bytes as the .sqlite3', [garbage]);
    expect(reasons[0]).toBe('SQLITE_NOTADB');
    // A vault file with damaged pages is opened read-only (issue 14 item 7): nothing is reduced,
    // recovery serves what is intact (here nothing is: every page after the header is garbage).
    const thrown = await open(db, { vaultErrors: 'throw' }).then(
      async (tt) => (await tt.close(), undefined),
      (e: unknown) => e,
    );
    expect(thrown).toMatchObject({ name: 'VaultHealthError', code: 'E_VAULT_CORRUPT' });
    await using tt = await open(db);
    const w = buildWorkload({ id: `startup-${cellNo}-pages`, variant: 200 + cellNo });
    const results = await runWorkload(tt, w);
    const report = await checkResults(results, (id) => recoverViaTool(tt.recoveryTool, w.id, id));
    expect(report.problems).toEqual([]);
    expect(passedThrough(results)).toBe(results.length);
    expect(
      results.every((r) =>
        r.output?.decisions.some((d) => d.kind === 'failed_open' && d.error === 'VaultHealthError:E_VAULT_CORRUPT'),
      ),
    ).toBe(true);
    const status = JSON.parse(await tt.recoveryTool.handle({ action: 'status' }, { sessionId: w.id })) as Record<
      string,
      unknown
    >;
    expect(status).toMatchObject({ passthrough: true, read_only: true, vault_health: { state: 'corrupt' } });
    rows.push({
      cell: 'corrupted pages before open',
      injection: 'garbage pages after the header',
      outcome: `opened read-only (health corrupt, ${(status['vault_health'] as { detail?: string }).detail}); 'throw': rejects VaultHealthError:E_VAULT_CORRUPT; default: ${summary(results, report.receipts.length, report.recovered)}; intact artifacts recover (test/reliability/health.test.ts)`,
    });
  });

  it('vault locked by another process at open: passes everything through (default), or rejects with VaultOpenError', async () => {
    const db = join(cellDir(), 'vault.sqlite3');
    await (await createVault({ path: db })).close();
    const holder = startScript('lock-holder.ts', [db]);
    try {
      expect(await firstLine(holder)).toBe('ready');
      const [reason] = await startupCell(
        'vault locked at open',
        'child holds BEGIN EXCLUSIVE before createTerminator; TOKEN_TERMINATOR_BUSY_TIMEOUT_MS 50',
        [db],
        { busyTimeoutMs: 50 },
      );
      expect(reason).toMatch(/^SQLITE_BUSY/);
    } finally {
      holder.kill('SIGKILL');
    }
  });

  it('corrupted vault file after open: every vault call fails, results pass through with failed_open', async () => {
    const db = join(cellDir(), 'vault.sqlite3');
    await using tt = await open(db);
    for (let i = 0; i < 8; i++) await tt.vault.put({ content: `older evidence ${i} `.repeat(2000) });
    corruptUnderOpenVault(db);
    const results = await checkCell('corrupted file after open', 'pages overwritten under an open vault', tt, {
      failedOpenIn: ['tool_result', 'request'],
      passThrough: ['tool_result'],
    });
    expect(errorLabels(results)).toMatch(/SQLITE_CORRUPT/);
  });

  it('read-only location before open: passes everything through (default), or rejects with VaultOpenError', async () => {
    const d = cellDir();
    writeFileSync(join(d, 'a-file'), 'x');
    const paths = [join(d, 'a-file', 'vault.sqlite3')];
    const ro = join(d, 'immutable');
    if (chattrOk) {
      mkdirSync(ro, { mode: 0o700 });
      execFileSync('chattr', ['+i', ro]);
      paths.push(join(ro, 'vault.sqlite3'));
    }
    try {
      const reasons = await startupCell(
        'read-only dir before open',
        `path under a regular file${chattrOk ? '; chattr +i directory (root ignores chmod)' : ''}`,
        paths,
      );
      expect(reasons[0]).toBe('ENOTDIR');
      if (chattrOk) expect(reasons[1]).toBe('EPERM');
    } finally {
      if (chattrOk) execFileSync('chattr', ['-i', ro]);
    }
  });

  it.skipIf(!chattrOk)(
    'read-only files after open (chattr +i): writes fail, results pass through, then heals',
    async () => {
      const d = cellDir();
      const db = join(d, 'vault.sqlite3');
      await using tt = await open(db);
      await tt.vault.put({ content: 'warm-up evidence\n'.repeat(300) }); // creates the -wal file
      const targets = [db, `${db}-wal`, d];
      execFileSync('chattr', ['+i', ...targets]);
      let lifted = false;
      const lift = (): void => {
        if (!lifted) execFileSync('chattr', ['-i', ...targets]);
        lifted = true;
      };
      try {
        const results = await checkCell(
          'read-only after open',
          'chattr +i on the vault file, its -wal and the directory',
          tt,
          { failedOpenIn: ['tool_result', 'request'], passThrough: ['tool_result'] },
          lift,
        );
        expect(errorLabels(results)).toMatch(/SQLITE_IOERR|SQLITE_READONLY/);
        await checkHealed(tt);
      } finally {
        lift();
      }
    },
  );

  it.skipIf(!mountOk)('disk full (ENOSPC on a small tmpfs): results pass through with failed_open', async () => {
    const mnt = cellDir();
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=512k,mode=0700', 'tmpfs', mnt]);
    try {
      await using tt = await open(join(mnt, 'vault', 'vault.sqlite3'));
      // Leave a few pages free: enough for the open vault, not for any artifact.
      const free = Number(execFileSync('df', ['--output=avail', '-B1', mnt]).toString().trim().split('\n').pop());
      writeFileSync(join(mnt, 'filler'), Buffer.alloc(Math.max(0, free - 8192)));
      const results = await checkCell('disk full', '512 KiB tmpfs filled to 8 KiB free', tt, {
        failedOpenIn: ['tool_result', 'request'],
        passThrough: ['tool_result'],
      });
      expect(errorLabels(results)).toMatch(/SQLITE_FULL|SQLITE_IOERR/);
    } finally {
      execFileSync('umount', ['-l', mnt]);
    }
  });

  it('disk write error (EFBIG: file-size limit in a child process): results pass through with failed_open', async () => {
    const db = join(cellDir(), 'vault.sqlite3');
    const v = await createVault({ path: db });
    await v.close();
    const kb = Math.ceil(statSync(db).size / 1024) + 8;
    const out = await runToEnd('sh', [
      '-c',
      `ulimit -f ${kb} && exec "$0" --import tsx "$1" "$2" "$3"`,
      process.execPath,
      fixture('workload-worker.ts'),
      db,
      RTK_STUB,
    ]);
    expect(out.stderr).toBe('');
    const r = JSON.parse(out.stdout.trim().split('\n').pop() ?? '{}') as Record<string, unknown>;
    rows.push({
      cell: 'disk write error',
      injection: `ulimit -f ${kb} KiB on the worker process (EFBIG)`,
      outcome: `failed_open ${String(r['failedOpen'])} (${String(r['errors'])}); passed through ${String(r['passedThrough'])}/${String(r['items'])}; receipts ${String(r['recovered'])}/${String(r['receipts'])} recover`,
    });
    expect(r['problems']).toEqual([]);
    expect(String(r['failedOpen'])).toMatch(/compressToolResult/);
    expect(String(r['errors'])).toMatch(/SQLITE_(FULL|IOERR)/);
  });
});

describe.skipIf(inject('pgUrl') === '')(
  'PostgreSQL vault faults (a private server the cells stop, lock and break)',
  () => {
    // Its own cluster, so stopping it cannot disturb the other test files' server.
    const clusterDir = mkdtempSync(join(tmpdir(), 'tt-rel-pg-'));
    let cluster: Cluster;
    let dbNo = 0;
    beforeAll(async () => {
      cluster = await startCluster(clusterDir);
    }, 120_000);
    afterAll(() => stopCluster(clusterDir));

    const admin = async <T>(fn: (c: pg.Client) => Promise<T>, database = 'postgres'): Promise<T> => {
      const u = new URL(cluster.url);
      u.pathname = `/${database}`;
      const c = new pg.Client({ connectionString: u.toString() });
      await c.connect();
      try {
        return await fn(c);
      } finally {
        await c.end();
      }
    };
    /** A fresh database for one cell; returns its name and URL. */
    const database = async (): Promise<{ name: string; url: string }> => {
      const name = `cell_${++dbNo}`;
      await admin((c) => c.query(`CREATE DATABASE ${name}`));
      const u = new URL(cluster.url);
      u.pathname = `/${name}`;
      return { name, url: u.toString() };
    };
    const openPg = (
      url: string,
      overrides: NonNullable<Parameters<typeof createTerminator>[0]>['overrides'] = {},
    ): Promise<Terminator> => createTerminator({ env: {}, overrides: { ...baseOverrides, dbUrl: url, ...overrides } });
    /** The same Terminator, running `inject` once just before its `at`-th facade call. */
    const injectAt = (tt: Terminator, at: number, inject: () => void | Promise<void>): Terminator => {
      let calls = 0;
      const before = async (): Promise<void> => {
        if (++calls === at) await inject();
      };
      return new Proxy(tt, {
        get(target, prop, receiver) {
          const value: unknown = Reflect.get(target, prop, receiver);
          if (
            prop !== 'reduceToolCall' &&
            prop !== 'reduceToolResult' &&
            prop !== 'reduceRequest' &&
            prop !== 'compileRequest'
          )
            return value;
          return async (...args: unknown[]) => {
            await before();
            return (value as (...a: unknown[]) => unknown).apply(target, args);
          };
        },
      });
    };
    const terminate = (name: string) =>
      admin((c) =>
        c.query(
          'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
          [name],
        ),
      );

    it('server stopped mid-session: the rest passes through with failed_open, receipts delivered before recover after the restart, then heals', async () => {
      const db = await database();
      const tt = await openPg(db.url);
      try {
        const results = await checkCell(
          'PostgreSQL stopped mid-session',
          'pg_ctl stop -m immediate before the 20th of 46 facade calls; started again after the workload',
          injectAt(tt, 20, () => pgCtl(clusterDir, 'stop', 'immediate')),
          { failedOpenIn: ['tool_result', 'request'] },
          () => pgCtl(clusterDir, 'start'),
          tt,
        );
        expect(
          results
            .slice(0, 19)
            .flatMap((r) => r.output?.decisions ?? [])
            .filter((d) => d.kind === 'failed_open'),
        ).toEqual([]);
        expect(errorLabels(results)).toMatch(/ECONNREFUSED|57P01|Connection terminated/);
        await checkHealed(tt);
      } finally {
        await tt.close();
      }
    });

    it('connection reset (every socket cut mid-session): fails open or retries on a new connection, nothing delivered is lost, then heals', async () => {
      const db = await database();
      const target = new URL(db.url);
      const sockets = new Set<Socket>();
      let cut = 0;
      const proxy: Server = createServer((client) => {
        const upstream = connect(Number(target.port), target.hostname);
        for (const s of [client, upstream]) {
          sockets.add(s);
          s.on('close', () => sockets.delete(s));
          s.on('error', () => undefined);
        }
        client.pipe(upstream).pipe(client);
      });
      await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
      const viaProxy = new URL(db.url);
      viaProxy.port = String((proxy.address() as { port: number }).port);
      const tt = await openPg(viaProxy.toString());
      try {
        const reset = (): void => {
          for (const s of sockets) {
            s.resetAndDestroy();
            cut++;
          }
        };
        const results = await checkCell(
          'PostgreSQL connection reset',
          'a TCP proxy resets every pooled connection before the 12th and the 30th facade call',
          injectAt(injectAt(tt, 12, reset), 30, reset),
          { failedOpenIn: [] },
          undefined,
          tt,
        );
        expect(cut).toBeGreaterThan(0);
        expect(results.length).toBe(46);
        await checkHealed(tt);
      } finally {
        await tt.close();
        proxy.close();
      }
    });

    it('statement timeout (writes block on a held table lock): fail open, then heals', async () => {
      const db = await database();
      const tt = await openPg(db.url, { busyTimeoutMs: 60_000, dbStatementTimeoutMs: 300 });
      const u = new URL(cluster.url);
      u.pathname = `/${db.name}`;
      const holder = new pg.Client({ connectionString: u.toString() });
      await holder.connect();
      try {
        await holder.query('BEGIN');
        await holder.query('LOCK TABLE vault_meta IN EXCLUSIVE MODE');
        const results = await checkCell(
          'PostgreSQL statement timeout',
          'another session holds LOCK TABLE vault_meta IN EXCLUSIVE MODE; TOKEN_TERMINATOR_DB_STATEMENT_TIMEOUT_MS 300',
          tt,
          { failedOpenIn: ['tool_result', 'request'] },
          async () => {
            await holder.query('ROLLBACK');
          },
        );
        expect(errorLabels(results)).toMatch(/57014/);
        await checkHealed(tt);
      } finally {
        await holder.end().catch(() => undefined);
        await tt.close();
      }
    });

    it('read-only transactions (default_transaction_read_only): writes fail open, reads keep serving, then heals', async () => {
      const db = await database();
      const tt = await openPg(db.url);
      try {
        const seed = await tt.vault.put({
          content: 'evidence written before the database turned read-only\n'.repeat(40),
          toolName: 'terminal',
          sessionId: 'ro',
        });
        await admin((c) => c.query(`ALTER DATABASE ${db.name} SET default_transaction_read_only = on`));
        await terminate(db.name); // pooled connections pick the setting up when they reconnect
        const results = await checkCell(
          'PostgreSQL read-only',
          'ALTER DATABASE … SET default_transaction_read_only = on, pooled connections terminated',
          tt,
          { failedOpenIn: ['tool_result', 'request'], passThrough: ['tool_result'] },
          async () => {
            expect((await recoverViaTool(tt.recoveryTool, 'ro', seed.artifactId)).content).toContain('read-only');
            await admin((c) => c.query(`ALTER DATABASE ${db.name} RESET default_transaction_read_only`));
            await terminate(db.name);
          },
        );
        expect(errorLabels(results)).toMatch(/25006/);
        await checkHealed(tt);
      } finally {
        await tt.close();
      }
    });

    it('disk full (a trigger raising disk_full on every insert): fail open, then heals', async () => {
      const db = await database();
      const tt = await openPg(db.url);
      const tables = ['artifacts', 'artifact_observations', 'artifact_exposures', 'artifact_access'];
      try {
        await admin(async (c) => {
          await c.query(
            `CREATE FUNCTION tt_disk_full() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$`,
          );
          for (const t of tables)
            await c.query(
              `CREATE TRIGGER tt_disk_full BEFORE INSERT ON ${t} FOR EACH ROW EXECUTE FUNCTION tt_disk_full()`,
            );
        }, db.name);
        const results = await checkCell(
          'PostgreSQL disk full',
          'BEFORE INSERT triggers raise SQLSTATE 53100 (disk_full) on artifacts, observations, exposures, access/pins',
          tt,
          { failedOpenIn: ['tool_result', 'request'], passThrough: ['tool_result'] },
          () =>
            admin(async (c) => {
              for (const t of tables) await c.query(`DROP TRIGGER tt_disk_full ON ${t}`);
            }, db.name),
        );
        expect(errorLabels(results)).toMatch(/53100/);
        await checkHealed(tt);
      } finally {
        await tt.close();
      }
    });
  },
);

describe('counter faults', () => {
  it('counter throws: token-gated stages fail open, the budget falls back to the rough count', async () => {
    await using tt = await open(join(cellDir(), 'vault.sqlite3'), { counter: throwingCounter() });
    const results = await checkCell('counter throws', 'TokenCounter.count throws on every call', tt, {
      failedOpenIn: ['tool_result', 'request'],
    });
    const budget = decisionsOf(results, 'request').filter((d) => d.stage === 'capOutputBudget');
    expect(budget.length).toBeGreaterThan(0);
    expect(budget.every((d) => d.error !== undefined)).toBe(true);
    // The pressure still counts the prompt (roughly) on top of the output reserve: never 0, never NaN.
    const pressure = await tt.pressure({ model: workload.model, messages: workload.messages }, { sessionId: 's' });
    expect(Number.isSafeInteger(pressure)).toBe(true);
    expect(pressure).toBeGreaterThan(tt.config.incontext.minOutputTokens);
  });
});

describe('/tokenize (vLLM budget backend) faults', () => {
  const server = new TokenizeServer();
  let url = '';
  beforeAll(async () => {
    url = await server.listen();
  });
  afterAll(() => server.close());

  const route = { model: 'served-model', contextWindow: 32_768 };
  const request = () => ({
    model: 'served-model',
    messages: [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'count me' },
    ],
  });

  async function budgetCell(cell: string, injection: string, configure: () => Promise<string>): Promise<Decision[]> {
    const tokenizerUrl = await configure();
    await using tt = await open(join(cellDir(), 'vault.sqlite3'), {
      overrides: { incontext: { backend: 'vllm', tokenizerUrl, tokenizerTimeoutSeconds: 0.3 } },
    });
    const before = server.received.length;
    const input = request();
    const out = await tt.reduceRequest(input, { sessionId: 'tok', requestId: `tok-${cell}`, route });
    const budget = out.decisions.filter((d) => d.stage === 'capOutputBudget');
    const asked = server.received.length - before;
    rows.push({
      cell,
      injection,
      outcome: `${budget.map((d) => `${d.kind} "${d.reason}"${d.error === undefined ? '' : ` (${d.error})`}`).join('; ')}; /tokenize asked ${asked}×; messages unchanged: ${JSON.stringify(out.value['messages']) === JSON.stringify(input.messages)}`,
    });
    expect(out.value['messages']).toEqual(input.messages);
    expect(budget.length).toBe(1);
    return budget;
  }

  it('the runtime consults /tokenize when INCONTEXT_BACKEND=vllm (control)', async () => {
    server.mode = 'ok';
    server.maxModelLen = 32_768;
    const before = server.received.length;
    await budgetCell('/tokenize ok (control)', 'loopback server answers count 1000', async () => url);
    expect(server.received.length).toBeGreaterThan(before);
  });

  const faults: [string, string, () => Promise<string>][] = [
    ['/tokenize 500', 'HTTP 500', async () => ((server.mode = 'status500'), url)],
    ['/tokenize timeout', 'server never answers; timeout 0.3 s', async () => ((server.mode = 'hang'), url)],
    ['/tokenize garbage', 'truncated JSON body', async () => ((server.mode = 'garbage'), url)],
    [
      '/tokenize wrong max_model_len',
      'max_model_len 65536 vs window 32768',
      async () => ((server.mode = 'wrongLength'), url),
    ],
    ['/tokenize refused', 'nothing listens on the port', () => closedPortUrl()],
  ];
  for (const [cell, injection, configure] of faults) {
    it(`${cell}: the prompt passes through unchanged, the cap falls back to rough + F, the fault is recorded`, async () => {
      const before = server.received.length;
      const [d] = await budgetCell(cell, injection, configure);
      // Documented degradation (incontext: exact count fails → rough estimate + F), not a pass-through.
      expect(d!.kind).toBe('applied');
      expect(d!.reason).toBe('capped (fallback count)');
      expect(d!.error).toMatch(/^BudgetCounterError:E_COUNTER_/);
      if (cell !== '/tokenize refused') expect(server.received.length).toBeGreaterThan(before);
    });
  }
});

describe('rtk faults (tool-call stream)', () => {
  let tt: Terminator;
  // Only the hang cell needs a short deadline; every other stub must be allowed to start, exit or
  // kill itself on a loaded machine without its fault turning into a timeout.
  let patient: Terminator;
  beforeAll(async () => {
    tt = await open(join(cellDir(), 'vault.sqlite3'), { overrides: { timeoutMs: 200 } });
    patient = await open(join(cellDir(), 'vault.sqlite3'), { overrides: { timeoutMs: 30_000 } });
  });
  afterAll(async () => {
    await tt.close();
    await patient.close();
  });

  const call = (command: string): ToolCall => ({ id: `c-${command}`, name: 'terminal', args: { command } });

  async function rtkCell(cell: string, command: string): Promise<{ out: ToolCall; decision: Decision | undefined }> {
    const input = call(command);
    const step = await (cell === 'rtk hangs' ? tt : patient).reduceToolCall(input, { sessionId: 'rtk' });
    const decision = step.decisions.find((d) => d.stage === 'rewriteTerminalCommand');
    const out = step.value;
    rows.push({
      cell,
      injection: `stub rtk: \`${command}\``,
      outcome: `${decision?.kind ?? 'no decision'} "${decision?.reason ?? ''}"${decision?.error === undefined ? '' : ` (${decision.error})`}; command ${out.args['command'] === command ? 'passed through' : `→ \`${String(out.args['command'])}\``}`,
    });
    // The terminator keeps working after the fault: a plain command is still rewritten.
    const next = await patient.reduceToolCall(call(`git status ${cell.length}`), { sessionId: 'rtk' });
    expect(String(next.value.args['command'])).toBe(`rtk git status ${cell.length}`);
    return { out, decision };
  }

  it('exit 0 and exit 3 (documented rewrites): the rewrite is applied', async () => {
    for (const [cell, command] of [
      ['rtk exit 0', 'git log stub-exit0'],
      ['rtk exit 3', 'git diff'],
    ] as const) {
      const { out, decision } = await rtkCell(cell, command);
      expect(decision?.kind).toBe('applied');
      expect(out.args['command']).toBe(`rtk ${command}`);
    }
  });

  it('exit 1 and exit 2 (documented: no equivalent / deny): the command passes through', async () => {
    for (const [cell, command] of [
      ['rtk exit 1', 'git log stub-exit1'],
      ['rtk exit 2', 'git log stub-exit2'],
    ] as const) {
      const { out, decision } = await rtkCell(cell, command);
      expect(out.args['command']).toBe(command);
      expect(decision?.kind).toBe('skipped');
    }
  });

  const faultCells: [string, string, string][] = [
    ['rtk hangs', 'git log stub-hang', 'E_RTK_TIMEOUT'],
    ['rtk crashes', 'git log stub-crash', 'E_RTK_SIGNAL'],
    ['rtk prints garbage', 'git log stub-garbage', 'E_RTK_INVALID_OUTPUT'],
    ['rtk exits 7 (other)', 'git log stub-exit7', 'E_RTK_EXIT_CODE'],
  ];
  for (const [cell, command, code] of faultCells) {
    it(`${cell}: the original command passes through and the fault is recorded as failed_open`, async () => {
      const { out, decision } = await rtkCell(cell, command);
      expect(out.args['command']).toBe(command);
      expect(decision).toMatchObject({ kind: 'failed_open', error: `RtkFaultError:${code}` });
    });
  }
  it('rtk binary missing: the original command passes through with failed_open', async () => {
    await using broken = await open(join(cellDir(), 'vault.sqlite3'), {
      overrides: { rtkPath: join(dir, 'no-such-rtk') },
    });
    const input = call('git status');
    const step = await broken.reduceToolCall(input, { sessionId: 'rtk' });
    const d = step.decisions.find((x) => x.stage === 'rewriteTerminalCommand');
    rows.push({
      cell: 'rtk missing',
      injection: 'TOKEN_TERMINATOR_RTK_PATH names no file',
      outcome: `${d?.kind} "${d?.reason}" (${d?.error}); command passed through: ${step.value === input}`,
    });
    expect(step.value).toBe(input);
    expect(d).toMatchObject({ kind: 'failed_open', reason: 'spawn', error: 'RtkFaultError:E_RTK_SPAWN' });
  });

  // Issue 8 asks for a failed_open decision in every fault cell (a fresh command each: faults are never cached).
  for (const [cell, command] of faultCells) {
    it(`${cell}: records a failed_open decision`, async () => {
      const step = await tt.reduceToolCall(call(`${command} strict`), { sessionId: 'rtk-strict' });
      expect(step.decisions.find((d) => d.stage === 'rewriteTerminalCommand')?.kind).toBe('failed_open');
    });
  }
});
