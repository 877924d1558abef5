import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/program.js';
import { createVault } from '../../src/vault/index.js';

const ROOT = resolve(import.meta.dirname, '..', '..');
let dir: string;
let db: string;
let bigId: string;
let jsonId: string;
const BIG = `${'line 𝄞 one 😀\r\n'.repeat(3000)}error: the end 👩‍👩‍👧`; // > 2 default pages, astral, CRLF, no final newline
const JSON_CONTENT = JSON.stringify({ status: 'failed', errors: ['Timeout in step 3'], count: 2 });

interface Run {
  code: number;
  stdout: Buffer;
  stderr: string;
}

/** The real CLI in a child process, with a clean environment (no TOKEN_TERMINATOR_* from the parent). */
function cli(
  args: string[],
  extraEnv: Record<string, string> = {},
  entry = ['--import', 'tsx', 'src/cli/main.ts'],
): Promise<Run> {
  const env: Record<string, string> = { PATH: process.env['PATH'] ?? '', HOME: dir, ...extraEnv };
  return new Promise((done) => {
    execFile(
      process.execPath,
      [...entry, ...args],
      { cwd: ROOT, env, encoding: 'buffer', maxBuffer: 64 << 20 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
        done({ code, stdout, stderr: stderr.toString('utf8') });
      },
    );
  });
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tt-cli-'));
  db = join(dir, 'vault.sqlite3');
  const vault = await createVault({ path: db });
  bigId = (await vault.put({ content: BIG, toolName: 'terminal' })).artifactId;
  jsonId = (await vault.put({ content: JSON_CONTENT, toolName: 'process' })).artifactId;
  await vault.close();
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('token-terminator CLI (child process)', () => {
  it('writes the exact bytes of a whole artifact, paging past the ceiling, with no newline added', async () => {
    const run = await cli(['artifact', 'get', bigId, '--db', db]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout.equals(Buffer.from(BIG, 'utf8'))).toBe(true);
  });

  it('slices by code points with --offset and --limit', async () => {
    const run = await cli(['artifact', 'get', bigId, '--db', db, '--offset', '5', '--limit', '3'], {
      TOKEN_TERMINATOR_MAX_PAGE_CHARS: '2',
    });
    expect(run.code).toBe(0);
    expect(run.stdout.toString('utf8')).toBe([...BIG].slice(5, 8).join(''));
  });

  it('prints parseable JSON with --json', async () => {
    const [get, status] = await Promise.all([
      cli(['artifact', 'get', jsonId, '--db', db, '--json']),
      cli(['status', '--db', db, '--json']),
    ]);
    expect(get.code).toBe(0);
    expect(status.code).toBe(0);
    expect(JSON.parse(get.stdout.toString())).toMatchObject({
      artifact_id: jsonId,
      content: JSON_CONTENT,
      next_offset: null,
    });
    expect(JSON.parse(status.stdout.toString())).toMatchObject({
      plugin: 'token-terminator',
      vault: { artifacts: 2 },
      db_path: db,
    });
  });

  it('exits 2 with a clear message for an unknown artifact or a bad variable', async () => {
    const id = `a_${'f'.repeat(32)}`;
    const [unknown, badEnv] = await Promise.all([
      cli(['artifact', 'get', id, '--db', db]),
      cli(['artifact', 'get', bigId, '--db', db], { TOKEN_TERMINATOR_MAX_PAGE_CHARS: 'lots' }),
    ]);
    expect(unknown.code).toBe(2);
    expect(unknown.stdout.length).toBe(0);
    expect(unknown.stderr).toContain(`unknown artifact ${id}`);
    expect(unknown.stderr).toContain('E_ARTIFACT_NOT_FOUND');
    expect(badEnv.code).toBe(2);
    expect(badEnv.stderr).toContain('TOKEN_TERMINATOR_MAX_PAGE_CHARS must be an integer ≥ 1, got "lots"');
  });

  it('reports status for a missing vault without creating it', async () => {
    const missing = join(dir, 'fresh', 'never.sqlite3');
    const run = await cli(['status', '--json'], { TOKEN_TERMINATOR_DB_PATH: missing });
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout.toString())).toMatchObject({
      vault_available: false,
      vault_exists: false,
      db_path: missing,
    });
    expect(existsSync(missing)).toBe(false);
  });

  it('runs through the bin launcher', async () => {
    const run = await cli(['artifact', 'get', jsonId, '--db', db], {}, ['bin/token-terminator.js']);
    expect(run.stderr).toBe('');
    expect(run.stdout.toString('utf8')).toBe(JSON_CONTENT);
  });
});

describe('command registry', () => {
  it('builds every command, in help order, each under the name it is loaded by', async () => {
    const program = await buildProgram();
    const names = program.commands.map((c) => c.name());
    expect(names).toEqual([
      'status',
      'artifact',
      'replay',
      'stats',
      'compare',
      'bench',
      'report',
      'eval',
      'proxy',
      'vault',
    ]);
    for (const name of names) expect((await buildProgram(name)).commands.map((c) => c.name())).toEqual([name]);
    const artifact = program.commands.find((c) => c.name() === 'artifact');
    expect(artifact?.commands.map((c) => c.name())).toEqual(['get', 'peek', 'find', 'search']);
    for (const sub of [program.commands.find((c) => c.name() === 'status'), ...(artifact?.commands ?? [])]) {
      const flags = sub?.options.map((o) => o.long);
      expect(flags).toEqual(expect.arrayContaining(['--db', '--json']));
    }
  });

  it('loads only the command it runs: `proxy` registers no other command', async () => {
    const program = await buildProgram('proxy');
    expect(program.commands.map((c) => c.name())).toEqual(['proxy']);
    expect((await buildProgram('no-such-command')).commands.length).toBe((await buildProgram()).commands.length);
  });
});
