/** Shared helpers for the vault tests: temp dirs and child processes running fixture scripts. */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Database from 'better-sqlite3';
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

/**
 * The SQL statements better-sqlite3 runs (every connection of this process) while `fn` runs, by
 * their text with whitespace collapsed: how a test sees transactions (`begin immediate`, `commit`).
 */
export async function statementsDuring(fn: () => Promise<unknown>): Promise<Map<string, number>> {
  const probe = new Database(':memory:');
  const proto = Object.getPrototypeOf(probe.prepare('select 1')) as Record<string, unknown>;
  probe.close();
  const counts = new Map<string, number>();
  const originals = (['run', 'all', 'get', 'iterate'] as const).map((name) => [name, proto[name]] as const);
  for (const [name, original] of originals) {
    proto[name] = function (this: { source: string }, ...args: unknown[]) {
      const text = this.source.replace(/\s+/g, ' ').trim();
      counts.set(text, (counts.get(text) ?? 0) + 1);
      return (original as (...a: unknown[]) => unknown).apply(this, args);
    };
  }
  try {
    await fn();
  } finally {
    for (const [name, original] of originals) proto[name] = original;
  }
  return counts;
}

/** How many statements of `counts` start with `prefix` (case-insensitive). */
export function countOf(counts: ReadonlyMap<string, number>, prefix: string): number {
  let n = 0;
  for (const [text, c] of counts) if (text.toLowerCase().startsWith(prefix.toLowerCase())) n += c;
  return n;
}
