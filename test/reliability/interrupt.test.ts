/**
 * Interrupting a test run (Ctrl-C: SIGINT; or SIGTERM) leaves no PostgreSQL server and no temp
 * cluster behind: a real vitest run in a child process, with the suite's global setup starting a
 * throw-away cluster from the machine's binaries, interrupted while a test waits.
 */
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, inject, it } from 'vitest';
import { findBinDir } from '../support/postgres.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CONFIG = 'test/fixtures/interrupt/vitest.config.ts';

/** The environment of a child run: ours without the suite's own server URL or vitest's worker variables. */
function childEnv(extra: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env))
    if (v !== undefined && k !== 'TOKEN_TERMINATOR_TEST_PG_URL' && k !== 'CI' && !k.startsWith('VITEST')) env[k] = v;
  return { ...env, NO_COLOR: '1', ...extra };
}

const binaries = ((): boolean => {
  try {
    findBinDir();
    return true;
  } catch {
    return false;
  }
})();

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
};

async function interruptedRun(
  signal: NodeJS.Signals,
): Promise<{ leftovers: string[]; postmaster: number; code: number | null }> {
  // A private tmp dir (world-writable, sticky: the server runs as the postgres user when we are root).
  const tmp = mkdtempSync(join(tmpdir(), 'tt-interrupt-'));
  chmodSync(tmp, 0o1777);
  const child = spawn(process.execPath, ['node_modules/vitest/vitest.mjs', 'run', '-c', CONFIG, 'forever'], {
    cwd: ROOT,
    env: childEnv({ TMPDIR: tmp, CI: '1' }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the run never reached its test:\n${output}`)), 150_000);
      const seen = (chunk: Buffer): void => {
        output += chunk.toString();
        if (output.includes('WAITING postgres://')) {
          clearTimeout(timer);
          resolve();
        }
      };
      child.stdout.on('data', seen);
      child.stderr.on('data', seen);
      child.on('close', () => reject(new Error(`the run ended early:\n${output}`)));
    });
    const cluster = readdirSync(tmp).find((d) => d.startsWith('tt-test-pg-'));
    expect(cluster, output).toBeDefined();
    const postmaster = Number(readFileSync(join(tmp, cluster!, 'data', 'postmaster.pid'), 'utf8').split('\n')[0]);
    expect(alive(postmaster)).toBe(true);
    child.kill(signal);
    const code = await Promise.race([
      exited,
      new Promise<null>((_, reject) =>
        setTimeout(() => reject(new Error(`no exit after ${signal}:\n${output}`)), 60_000),
      ),
    ]);
    for (let i = 0; i < 100 && alive(postmaster); i++) await new Promise((r) => setTimeout(r, 100));
    return { leftovers: readdirSync(tmp).filter((d) => d.startsWith('tt-test-pg-')), postmaster, code };
  } finally {
    child.kill('SIGKILL');
    rmSync(tmp, { recursive: true, force: true });
  }
}

describe.skipIf(!binaries && inject('pgUrl') === '')('interrupting a test run', () => {
  it.each(['SIGINT', 'SIGTERM'] as const)(
    '%s stops the throw-away PostgreSQL server and removes its cluster',
    async (signal) => {
      const { leftovers, postmaster } = await interruptedRun(signal);
      expect(alive(postmaster)).toBe(false);
      expect(leftovers).toEqual([]);
    },
    240_000,
  );
});

describe('a test run on a machine without PostgreSQL server binaries', () => {
  const run = (extra: Record<string, string>): Promise<{ code: number | null; output: string }> =>
    new Promise((resolve) => {
      const child = spawn(process.execPath, ['node_modules/vitest/vitest.mjs', 'run', '-c', CONFIG, 'no-server'], {
        cwd: ROOT,
        env: childEnv({ TOKEN_TERMINATOR_PG_BINDIR: '/nonexistent/pg/bin', ...extra }),
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      child.stdout.on('data', (c: Buffer) => (output += c.toString()));
      child.stderr.on('data', (c: Buffer) => (output += c.toString()));
      child.on('close', (code) => resolve({ code, output }));
    });

  it('passes, with the PostgreSQL tests reported skipped in one plain line', async () => {
    const { code, output } = await run({});
    expect(code, output).toBe(0);
    const lines = output.split('\n').filter((l) => l.includes('PostgreSQL'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^PostgreSQL tests skipped: .*TOKEN_TERMINATOR_PG_BINDIR/);
  }, 120_000);

  it('fails loudly under CI, naming what is missing', async () => {
    const { code, output } = await run({ CI: '1' });
    expect(code).not.toBe(0);
    expect(output).toContain('the test suite needs PostgreSQL and could not start a throw-away server');
    expect(output).toContain('TOKEN_TERMINATOR_PG_BINDIR=/nonexistent/pg/bin has no initdb');
  }, 120_000);
});
