/**
 * Running `rtk rewrite <command>`: argv array, no shell, a deadline, kill-and-reap on timeout or
 * cancellation. The spawn function is injected so tests can count and inspect children.
 */
import { spawn as nodeSpawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, isAbsolute, join } from 'node:path';

/** The subset of `child_process.spawn` the operators use. */
export type Spawner = (file: string, args: readonly string[], options: SpawnOptions) => ChildProcess;

export const defaultSpawner: Spawner = (file, args, options) => nodeSpawn(file, [...args], options);

/** What one `rtk rewrite` call produced. Only `rewrite` and `none` are cacheable. */
export type RewriteOutcome =
  | { readonly kind: 'rewrite'; readonly command: string; readonly exitCode: 0 | 3 }
  | { readonly kind: 'none'; readonly exitCode: number }
  | { readonly kind: 'timeout' }
  | { readonly kind: 'cancelled' }
  | { readonly kind: 'error'; readonly reason: 'spawn' | 'signal' | 'invalid_output' | 'exit_code' };

export interface RunRewriteOptions {
  readonly rtkPath: string;
  readonly command: string;
  readonly cwd: string;
  readonly timeoutMs: number;
  readonly signal: AbortSignal;
  readonly spawn: Spawner;
  /** Called with the child's pid as soon as it exists (tests use it to check reaping). */
  readonly onSpawn?: (pid: number) => void;
}

const MAX_STDOUT = 64 * 1024;
// A real rewrite invokes rtk somewhere (`rtk git status`, `cd x && rtk cargo test`).
const INVOKES_RTK = /(?:^|[\s;&|(])rtk\s/;

/**
 * Exit 0 or 3 with a non-empty trimmed stdout that differs from the command and invokes rtk →
 * rewrite; exit 1 or 2, or an empty/identical stdout → none; anything else → error. The promise
 * settles only after the child has exited (it is reaped, never left behind).
 */
export function runRtkRewrite(options: RunRewriteOptions): Promise<RewriteOutcome> {
  return new Promise((resolve) => {
    if (options.signal.aborted) return resolve({ kind: 'cancelled' });
    let child: ChildProcess;
    try {
      child = options.spawn(options.rtkPath, ['rewrite', options.command], {
        cwd: options.cwd,
        shell: false,
        stdio: ['ignore', 'pipe', 'ignore'],
        windowsHide: true,
      });
    } catch {
      return resolve({ kind: 'error', reason: 'spawn' });
    }
    let stdout = '';
    let ended: RewriteOutcome | undefined;
    const stop = (outcome: RewriteOutcome): void => {
      ended ??= outcome;
      child.kill('SIGKILL');
    };
    const timer = setTimeout(() => stop({ kind: 'timeout' }), options.timeoutMs);
    const onAbort = (): void => stop({ kind: 'cancelled' });
    options.signal.addEventListener('abort', onAbort, { once: true });
    if (child.pid !== undefined) options.onSpawn?.(child.pid);
    child.stdout?.setEncoding('utf8');
    child.stdout?.on('data', (chunk: string) => {
      stdout += chunk;
      if (stdout.length > MAX_STDOUT) stop({ kind: 'error', reason: 'invalid_output' });
    });
    let settled = false;
    const finish = (outcome: RewriteOutcome): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal.removeEventListener('abort', onAbort);
      resolve(outcome);
    };
    child.once('error', () => finish(ended ?? { kind: 'error', reason: 'spawn' }));
    // 'close' fires after exit and after stdio closed: the child has been reaped by then.
    child.once('close', (code, signal) => finish(ended ?? classify(code, signal, stdout, options.command)));
  });
}

function classify(code: number | null, signal: NodeJS.Signals | null, stdout: string, command: string): RewriteOutcome {
  if (code === null || signal !== null) return { kind: 'error', reason: 'signal' };
  if (code !== 0 && code !== 3)
    return code === 1 || code === 2 ? { kind: 'none', exitCode: code } : { kind: 'error', reason: 'exit_code' };
  const rewritten = stdout.trim();
  if (rewritten === '' || rewritten === command.trim()) return { kind: 'none', exitCode: code };
  if (/[\u0000-\u0008\u000e-\u001f\u007f\ufffd]/.test(rewritten) || !INVOKES_RTK.test(rewritten)) {
    return { kind: 'error', reason: 'invalid_output' };
  }
  return { kind: 'rewrite', command: rewritten, exitCode: code };
}

/** A pinned path wins; otherwise the first executable `rtk` on PATH; undefined when none. */
export function resolveRtkPath(
  pinned: string | undefined,
  env: Readonly<Record<string, string | undefined>>,
): string | undefined {
  if (pinned !== undefined && pinned.trim() !== '') return pinned;
  for (const dir of (env['PATH'] ?? '').split(delimiter)) {
    if (dir === '' || !isAbsolute(dir)) continue; // a relative PATH entry is a hijack risk
    const candidate = join(dir, process.platform === 'win32' ? 'rtk.exe' : 'rtk');
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** Whether an `rtk` that can be run exists: the pinned path (when set) or one on PATH, executable. */
export function rtkAvailable(pinned: string | undefined, env: Readonly<Record<string, string | undefined>>): boolean {
  const path = resolveRtkPath(pinned, env);
  if (path === undefined) return false;
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}
