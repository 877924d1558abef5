import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { followLauncher } from '../../src/cli/launcher.js';

/** A manual clock for the watch: `tick()` runs the check once. */
function manual(): { every: (check: () => void) => () => void; tick: () => void; cancelled: () => boolean } {
  let check: (() => void) | undefined;
  let cancelled = false;
  return {
    every: (c) => ((check = c), () => void (cancelled = true)),
    tick: () => check?.(),
    cancelled: () => cancelled,
  };
}

describe('followLauncher', () => {
  it('stops once, when npm started the process and its parent changed', () => {
    let ppid = 100;
    let gone = 0;
    const clock = manual();
    followLauncher({ env: { npm_command: 'exec' }, ppid: () => ppid, every: clock.every, onGone: () => gone++ });
    clock.tick();
    expect(gone).toBe(0);
    ppid = 1;
    clock.tick();
    clock.tick();
    expect(gone).toBe(1);
    expect(clock.cancelled()).toBe(true);
  });

  it('does not watch a process npm did not start (a service manager or nohup may re-parent it on purpose)', () => {
    let ppid = 100;
    let gone = 0;
    const clock = manual();
    followLauncher({ env: {}, ppid: () => ppid, every: clock.every, onGone: () => gone++ });
    ppid = 1;
    clock.tick();
    expect(gone).toBe(0);
  });

  it('stops watching when asked', () => {
    let ppid = 100;
    let gone = 0;
    const clock = manual();
    const stop = followLauncher({
      env: { npm_command: 'test' },
      ppid: () => ppid,
      every: clock.every,
      onGone: () => gone++,
    });
    stop();
    ppid = 1;
    clock.tick();
    expect(gone).toBe(0);
    expect(clock.cancelled()).toBe(true);
  });
});

describe('the proxy under npm (npm → sh -c → node)', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  it('stops with its worker when the shell npm ran it in is killed by SIGTERM', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tt-launcher-'));
    dirs.push(dir);
    const main = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));
    // `; true` keeps the shell between npm and node, as npm's `sh -c` keeps it for `npx`.
    const command = `"${process.execPath}" --import tsx "${main}" proxy --port 0 --workers 1 --quiet --db "${join(dir, 'v.sqlite3')}"; true`;
    const shell = spawn('sh', ['-c', command], {
      env: { ...process.env, npm_command: 'exec', NO_COLOR: '1' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let err = '';
    // 'close' comes once every holder of the pipe (the shell, the primary, its worker) has exited.
    const closed = new Promise<void>((resolve) => shell.stderr.on('close', () => resolve()));
    await new Promise<void>((resolve, reject) => {
      shell.stderr.on('data', (d: Buffer) => {
        err += d.toString();
        if (err.includes('listening on')) resolve();
      });
      shell.once('exit', () => reject(new Error(`the proxy did not start: ${err}`)));
    });
    shell.kill('SIGTERM');
    await closed;
    expect(err).toContain('listening on');
  }, 60_000);
});
