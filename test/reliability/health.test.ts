/**
 * Issue 14 item 7: the vault notices what happens to its file and says so. Before, a deleted vault
 * file kept accepting writes while `status` said healthy (and everything was lost at the next
 * start); a file with one damaged page made the whole vault pass-through at restart, intact
 * artifacts included; and a read-only vault at restart passed everything through instead of
 * serving its receipts read-only. Now: the file's identity is checked before every write, the
 * first corruption error runs the integrity check, `status` reports `vault_health`, one line on
 * stderr says it once, writes refuse (stages fail open) while reads of intact artifacts go on.
 */
import { execFileSync } from 'node:child_process';
import { closeSync, copyFileSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { createTerminator, type Terminator } from '../../src/runtime/index.js';
import type { ToolResult } from '../../src/step.js';
import { createVault, type Vault } from '../../src/vault/index.js';
import { canChattr, corruptUnderOpenVault, receiptIds, recoverViaTool, idMatches, tempDir } from './harness.js';

const { dir, cleanup } = tempDir('tt-health-');
afterAll(cleanup);
const restore: (() => void)[] = [];
afterEach(() => {
  for (const r of restore.splice(0)) r();
});

const search = (tag: string, lines = 400): ToolResult => ({
  callId: `c-${tag}`,
  name: 'search_files',
  args: { pattern: tag },
  content: Array.from(
    { length: lines },
    (_, i) => `src/${tag}/file_${i}.ts:${i + 1}: const ${tag}_${i} = lookup(${i});`,
  ).join('\n'),
});

const open = (path: string): Promise<Terminator> =>
  createTerminator({ env: {}, overrides: { dbPath: path }, ledger: false });

async function status(tt: Terminator): Promise<Record<string, any>> {
  return JSON.parse(await tt.recoveryTool.handle({ action: 'status' }, { sessionId: 'ops' })) as Record<string, any>;
}

/** Capture stderr lines (the one-line health notices). */
function stderrLines(): string[] {
  const lines: string[] = [];
  const spy = vi
    .spyOn(process.stderr, 'write')
    .mockImplementation((chunk: unknown) => (lines.push(String(chunk)), true));
  restore.push(() => spy.mockRestore());
  return lines;
}

describe('a vault file deleted or replaced while open', () => {
  it('deleted: writes refuse (stages fail open), status and one stderr line say so, earlier receipts still recover', async () => {
    const path = join(dir, 'deleted', 'v.sqlite3');
    const tt = await open(path);
    try {
      const first = await tt.reduceToolResult(search('before'), { sessionId: 's' });
      const [id] = receiptIds(first.value.content);
      expect(id).toBeDefined();
      const healthBefore = (await status(tt)).vault_health;
      for (const f of [path, `${path}-wal`, `${path}-shm`]) rmSync(f, { force: true });
      const lines = stderrLines();
      for (const tag of ['after1', 'after2', 'after3']) {
        const out = await tt.reduceToolResult(search(tag), { sessionId: 's' });
        // (Before: the write went to the unlinked file and a receipt was delivered for it.)
        expect(out.value.content).toBe(search(tag).content);
        expect(out.decisions.at(-1)).toMatchObject({ kind: 'failed_open', error: 'VaultHealthError:E_VAULT_GONE' });
      }
      expect(healthBefore).toEqual({ state: 'ok' });
      expect((await status(tt)).vault_health).toEqual({ state: 'deleted' });
      expect(lines.filter((l) => l.includes('was deleted while open'))).toHaveLength(1);
      expect(lines.join('')).not.toContain('lookup(');
      const got = await recoverViaTool(tt.recoveryTool, 's', id!);
      expect(got.content !== undefined && idMatches(id!, got.content)).toBe(true);
    } finally {
      await tt.close();
    }
  });

  it('each open vault says so once: a second one on the same file is not silenced by the first', async () => {
    const path = join(dir, 'deleted-twice', 'v.sqlite3');
    const a = await open(path);
    const b = await open(path);
    try {
      await a.reduceToolResult(search('a0'), { sessionId: 's' });
      for (const f of [path, `${path}-wal`, `${path}-shm`]) rmSync(f, { force: true });
      const lines = stderrLines();
      for (const tag of ['x1', 'x2']) {
        await a.reduceToolResult(search(`a-${tag}`), { sessionId: 's' });
        await b.reduceToolResult(search(`b-${tag}`), { sessionId: 's' });
      }
      expect((await status(a)).vault_health).toEqual({ state: 'deleted' });
      expect((await status(b)).vault_health).toEqual({ state: 'deleted' });
      // (Before: one line per path and process, so the second vault's users never read theirs.)
      expect(lines.filter((l) => l.includes('was deleted while open'))).toHaveLength(2);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('replaced by another file: writes refuse and status says replaced', async () => {
    const path = join(dir, 'replaced', 'v.sqlite3');
    const other = join(dir, 'replaced-other.sqlite3');
    (await open(other)).close();
    const tt = await open(path);
    try {
      await tt.reduceToolResult(search('one'), { sessionId: 's' });
      stderrLines();
      copyFileSync(other, `${path}.new`);
      renameSync(`${path}.new`, path);
      const out = await tt.reduceToolResult(search('two'), { sessionId: 's' });
      expect(out.decisions.at(-1)).toMatchObject({ kind: 'failed_open', error: 'VaultHealthError:E_VAULT_GONE' });
      expect((await status(tt)).vault_health).toEqual({ state: 'replaced' });
    } finally {
      await tt.close();
    }
  });
});

describe('a damaged vault file at restart', () => {
  it('serves intact artifacts exactly (read-only), refuses the damaged one, reports corrupt and reduces nothing', async () => {
    const path = join(dir, 'damaged', 'v.sqlite3');
    const tt = await open(path);
    const ids: string[] = [];
    // Small artifacts, stored inline in the table's leaf pages (about ten per page).
    for (let i = 0; i < 60; i++)
      ids.push(
        (
          await tt.vault.put({
            content: `artifact ${i} MARK${String(i).padStart(3, '0')} ${'x'.repeat(250)}`,
            toolName: 'terminal',
            sessionId: 's',
          })
        ).artifactId,
      );
    await tt.close();
    // Damage the page that holds artifact 40 (as a bad sector would): everything else stays intact.
    const bytes = readFileSync(path);
    const at = bytes.indexOf(Buffer.from('MARK040'));
    expect(at).toBeGreaterThan(0);
    const page = Math.floor(at / 4096) * 4096;
    const fd = openSync(path, 'r+');
    writeSync(fd, Buffer.alloc(4096, 0x5a), 0, 4096, page);
    closeSync(fd);
    const onPage = (i: number): boolean =>
      Math.floor(bytes.indexOf(Buffer.from(`MARK${String(i).padStart(3, '0')}`)) / 4096) * 4096 === page;

    const lines = stderrLines();
    const again = await open(path);
    try {
      const st = await status(again);
      let intact = 0;
      for (const [i, id] of ids.entries()) {
        const got = await recoverViaTool(again.recoveryTool, 's', id);
        if (onPage(i)) {
          expect(got.content, `artifact ${i} on the damaged page`).toBeUndefined();
        } else {
          expect(got.content, `artifact ${i}`).toBe(
            `artifact ${i} MARK${String(i).padStart(3, '0')} ${'x'.repeat(250)}`,
          );
          intact++;
        }
      }
      expect(intact).toBeGreaterThan(40); // (before: none, the whole vault went pass-through)
      expect(st.vault_health?.state).toBe('corrupt');
      expect(st).toMatchObject({ passthrough: true, read_only: true });
      expect(lines.filter((l) => l.includes('is damaged'))).toHaveLength(1);
      const out = await again.reduceToolResult(search('new'), { sessionId: 's' });
      expect(out.value.content).toBe(search('new').content);
      expect(out.decisions.at(-1)).toMatchObject({ kind: 'failed_open', error: 'VaultHealthError:E_VAULT_CORRUPT' });
    } finally {
      await again.close();
    }
  });
});

describe('a read-only vault at restart', () => {
  const chattrOk = canChattr(dir);
  it.skipIf(!chattrOk)(
    'serves existing receipts read-only and passes the rest through (chattr +i on the file and its directory)',
    async () => {
      const vaultDir = join(dir, 'readonly');
      const path = join(vaultDir, 'v.sqlite3');
      const tt = await open(path);
      const [id] = receiptIds((await tt.reduceToolResult(search('kept'), { sessionId: 's' })).value.content);
      expect(id).toBeDefined();
      await tt.close();
      execFileSync('chattr', ['+i', path, vaultDir]);
      restore.push(() => execFileSync('chattr', ['-i', path, vaultDir]));
      stderrLines();
      const ro = await open(path);
      try {
        expect(await status(ro)).toMatchObject({
          vault_available: true,
          passthrough: true,
          read_only: true,
          vault_health: { state: 'read_only' },
        });
        const got = await recoverViaTool(ro.recoveryTool, 's', id!);
        expect(got.content !== undefined && idMatches(id!, got.content)).toBe(true);
        const search2 = JSON.parse(
          await ro.recoveryTool.handle({ action: 'artifact_search', query: 'kept_7 ' }, { sessionId: 's' }),
        ) as { results: { artifact_id: string }[] };
        expect(search2.results.map((r) => r.artifact_id)).toEqual([id]);
        const out = await ro.reduceToolResult(search('later'), { sessionId: 's' });
        expect(out.value.content).toBe(search('later').content);
        expect(out.decisions.at(-1)).toMatchObject({
          kind: 'failed_open',
          error: 'VaultHealthError:E_VAULT_READ_ONLY',
        });
      } finally {
        await ro.close();
      }
    },
  );
});

describe('an abort while the vault write of a reduction runs', () => {
  it('lets the write finish atomically, then delivers nothing: no pin, the original passes through', async () => {
    const path = join(dir, 'abort', 'v.sqlite3');
    const tt = await open(path);
    try {
      const controller = new AbortController();
      const put = tt.vault.put.bind(tt.vault);
      tt.vault.put = async (input, scope) => {
        const result = await put(input, scope);
        controller.abort(); // the host gives up while the artifact is being written
        return result;
      };
      const raw = search('aborted', 2000);
      const out = await tt.reduceToolResult(raw, { sessionId: 's' }, controller.signal);
      expect(out.value).toBe(raw);
      tt.vault.put = put;
      // The lane runs one reduction at a time: once the next call is answered, the aborted one is over.
      await tt.reduceToolResult({ ...raw, callId: 'next', content: 'small' }, { sessionId: 's' });
      expect(await tt.vault.sessionPins({ tenant: '', sessionId: 's' })).toBeUndefined(); // nothing was delivered
      expect((await tt.vault.usage()).artifacts).toBe(1); // the write that was running completed
    } finally {
      await tt.close();
    }
  });
});

describe('a damaged page met by any data method', () => {
  const metric = (requestId: string) => ({
    sessionId: 's',
    requestId,
    mode: 'balanced',
    rawChars: 10,
    finalChars: 5,
    receipts: 0,
    failedOpen: false,
  });
  const calls: Record<string, (v: Vault) => Promise<unknown>> = {
    recordRequestMetrics: (v) => v.recordRequestMetrics([metric('r2'), metric('r3')]),
    requestMetricRows: (v) => v.requestMetricRows(),
    'workingState.apply': (v) => v.workingState.apply('s', [{ op: 'node_create', node_id: 'n2', kind: 'fact' }]),
    'workingState.get': (v) => v.workingState.get('s', { includeRetired: true, limit: 100 }),
  };
  for (const [name, call] of Object.entries(calls)) {
    it(`${name}: its corruption error runs the integrity check and health says corrupt`, async () => {
      stderrLines();
      const path = join(dir, `damaged-${name}.sqlite3`);
      await using vault = await createVault({ path });
      for (let i = 0; i < 8; i++) await vault.put({ content: `older evidence ${i} `.repeat(2000) });
      await vault.recordRequestMetric(metric('r1'));
      await vault.workingState.apply('s', [{ op: 'node_create', node_id: 'n1', kind: 'fact' }]);
      corruptUnderOpenVault(path);
      await expect(call(vault)).rejects.toMatchObject({ code: expect.stringMatching(/^SQLITE_(CORRUPT|NOTADB)/) });
      expect(vault.health()).toMatchObject({ state: 'corrupt' });
    });
  }
});
