/** Shared helpers for the vault tests: temp dirs and child processes running fixture scripts. */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = resolve(fileURLToPath(new URL('../..', import.meta.url)));
export const fixture = (name: string): string => join(repoRoot, 'test', 'fixtures', 'vault', name);

/** A fresh temp directory and a cleanup function. */
export function tempDir(prefix = 'tt-vault-'): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Start a fixture script under `node --import tsx`. */
export function startScript(script: string, args: readonly string[]): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', fixture(script), ...args], {
    cwd: repoRoot,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

export interface ScriptResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Run a fixture script to completion. */
export function runScript(script: string, args: readonly string[]): Promise<ScriptResult> {
  const child = startScript(script, args);
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr?.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  return new Promise((resolvePromise, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) => resolvePromise({ code, signal, stdout, stderr }));
  });
}

/**
 * Run several fixture scripts that wait at the start barrier (fixtures/vault/barrier.ts): once all
 * of them printed `ready`, create the go file so they proceed at the same instant. The `ready`
 * line is removed from each stdout.
 */
export async function runTogether(
  script: string,
  argsList: readonly (readonly string[])[],
  goFile: string,
): Promise<ScriptResult[]> {
  let waiting = argsList.length;
  let release: () => void = () => undefined;
  const allReady = new Promise<void>((r) => (release = r));
  const runs = argsList.map((args) => {
    const child = startScript(script, [...args, goFile]);
    let stdout = '';
    let stderr = '';
    let ready = false;
    child.stdout?.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
      if (!ready && stdout.startsWith('ready\n')) {
        ready = true;
        stdout = stdout.slice('ready\n'.length);
        if (--waiting === 0) release();
      }
    });
    child.stderr?.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    return new Promise<ScriptResult>((resolvePromise, reject) => {
      child.on('error', reject);
      child.on('close', (code, signal) => {
        if (!ready && --waiting === 0) release(); // a child that died early must not hang the others
        resolvePromise({ code, signal, stdout, stderr });
      });
    });
  });
  await Promise.race([allReady, Promise.all(runs)]);
  writeFileSync(goFile, 'go');
  return Promise.all(runs);
}
