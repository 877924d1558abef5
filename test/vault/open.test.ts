import {
  closeSync,
  existsSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readlinkSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TokenTerminatorError } from '../../src/errors.js';
import { MissingPackageError } from '../../src/optional-package.js';
import { VaultOpenError } from '../../src/vault/errors.js';
import { createVault } from '../../src/vault/index.js';
import { unavailableVault } from '../../src/vault/open.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'tt-vault-open-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

const failureOf = (path: string, options: { readOnlyFallback?: boolean } = {}): Promise<unknown> =>
  createVault({ path, ...options }).then(
    async (v) => (await v.close(), undefined),
    (e: unknown) => e,
  );
/** Paths this process has open (Linux). */
const openFiles = (): string[] =>
  readdirSync('/proc/self/fd').flatMap((fd) => {
    try {
      return [readlinkSync(join('/proc/self/fd', fd))];
    } catch {
      return [];
    }
  });

describe('opening a vault that cannot be opened', () => {
  it('wraps a file that is not a database: VaultOpenError, E_VAULT_OPEN, path and SQLITE_NOTADB, the file closed again', async () => {
    const path = join(dir, 'garbage.sqlite3');
    writeFileSync(path, Buffer.from('secret tool output, not a database \u0000'.repeat(200)));
    const error = await failureOf(path);
    expect(error).toBeInstanceOf(VaultOpenError);
    expect(error).toBeInstanceOf(TokenTerminatorError);
    expect(error).toMatchObject({ name: 'VaultOpenError', code: 'E_VAULT_OPEN', path, reason: 'SQLITE_NOTADB' });
    expect((error as Error).message).not.toContain('secret');
    expect(openFiles().filter((f) => f.startsWith(path))).toEqual([]);
  });

  it('wraps corrupt pages after a valid header (SQLITE_CORRUPT)', async () => {
    const path = join(dir, 'pages.sqlite3');
    const v = await createVault({ path });
    for (let i = 0; i < 6; i++) await v.put({ content: `evidence ${i} `.repeat(2000) });
    await v.close();
    const size = statSync(path).size;
    const fd = openSync(path, 'r+');
    writeSync(fd, Buffer.alloc(size - 4096, 0xa5), 0, size - 4096, 4096);
    closeSync(fd);
    expect(await failureOf(path, { readOnlyFallback: false })).toMatchObject({
      code: 'E_VAULT_OPEN',
      path,
      reason: expect.stringMatching(/^SQLITE_CORRUPT/),
    });
    // By default such a file is served read-only (what is intact still recovers), and says so.
    const salvaged = await createVault({ path });
    expect(salvaged.readOnly).toBe(true);
    expect(salvaged.health()).toMatchObject({ state: 'corrupt', detail: expect.stringMatching(/^SQLITE_CORRUPT/) });
    await expect(salvaged.put({ content: 'new' })).rejects.toMatchObject({ code: 'E_VAULT_CORRUPT' });
    await salvaged.close();
  });

  it('wraps a path below a regular file (ENOTDIR)', async () => {
    writeFileSync(join(dir, 'a-file'), 'x');
    const path = join(dir, 'a-file', 'vault.sqlite3');
    expect(await failureOf(path)).toMatchObject({ code: 'E_VAULT_OPEN', path, reason: 'ENOTDIR' });
  });

  // Node's recursive mkdir retries ENOENT under /proc forever, synchronously: the host hung at
  // startup, silently. In a child process, so a regression fails this test instead of freezing the run.
  it.skipIf(!existsSync('/proc/self'))(
    'fails with E_VAULT_OPEN for a path under /proc, where no directory can be made, instead of hanging',
    () => {
      const paths = ['/proc/tt-no-such/vault.sqlite3', '/proc/tt-no-such/a/b/vault.sqlite3'];
      const script = `
        import { createVault } from ${JSON.stringify(new URL('../../src/vault/index.ts', import.meta.url).href)};
        for (const path of ${JSON.stringify(paths)}) {
          try { await (await createVault({ path })).close(); console.log('opened ' + path); }
          catch (e) { console.log(JSON.stringify({ code: e.code, path: e.path, reason: e.reason })); }
        }`;
      const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
        encoding: 'utf8',
        timeout: 60_000, // a guard against the hang, not a speed requirement
      });
      expect(child.signal, child.stderr).toBeNull();
      expect(
        child.stdout
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as unknown),
      ).toEqual(paths.map((path) => ({ code: 'E_VAULT_OPEN', path, reason: 'ENOENT' })));
    },
    90_000,
  );

  it('names the missing driver and its install command when the cause is a missing package', () => {
    const error = VaultOpenError.wrap(
      'postgres://db/x',
      new MissingPackageError('pg', 'a PostgreSQL vault or ledger (postgres:// URL)', '^8.23.1'),
    );
    expect(error).toMatchObject({ code: 'E_VAULT_OPEN', reason: 'E_MISSING_PACKAGE' });
    expect(error.message).toContain('"pg" is not installed');
    expect(error.message).toContain('npm install pg@^8.23.1');
  });
});

describe('unavailableVault', () => {
  it('rejects every operation with its error, keeps the path, and closes without error', async () => {
    const error = VaultOpenError.wrap('/x/v.sqlite3', Object.assign(new Error('boom'), { code: 'SQLITE_NOTADB' }));
    const vault = unavailableVault('/x/v.sqlite3', error);
    expect(vault.path).toBe('/x/v.sqlite3');
    await expect(vault.put({ content: 'x' })).rejects.toBe(error);
    await expect(vault.page('a_1')).rejects.toBe(error);
    await expect(vault.pin(['a_1'])).rejects.toBe(error);
    await expect(vault.usage()).rejects.toBe(error);
    await vault.close();
    await vault[Symbol.asyncDispose]();
  });
});

describe('one fresh file opened twice at once in one process', () => {
  it('both open and migrate: the second waits for the first without blocking the thread the first needs', async () => {
    const path = join(dir, 'shared.sqlite3');
    const vaults = await Promise.all([createVault({ path }), createVault({ path }), createVault({ path })]);
    try {
      const { artifactId } = await vaults[0]!.put({ content: 'written by the first, read by the others' });
      for (const v of vaults.slice(1)) expect(await v.verify(artifactId)).toBe(true);
    } finally {
      await Promise.all(vaults.map((v) => v.close()));
    }
  });
});
