/** The real CLI's `proxy` command in its own process, as it is deployed. */
import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '..', '..');

export interface ProxyProcess {
  readonly child: ChildProcess;
  /** The URL the proxy says it listens on; rejects, with its stderr, if it exits first. */
  readonly url: Promise<string>;
  /** Everything the proxy wrote to stderr so far. */
  stderr(): string;
}

/**
 * Starts `token-terminator proxy --port 0 <flags>` with exactly `env`; `label` names it in errors.
 * One worker (`--workers 1`) unless the flags name `--workers`.
 */
export function spawnProxy(flags: readonly string[], env: Record<string, string>, label = 'proxy'): ProxyProcess {
  const workers = flags.includes('--workers') ? [] : ['--workers', '1'];
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'src/cli/main.ts', 'proxy', '--port', '0', ...workers, ...flags],
    {
      cwd: ROOT,
      env,
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  let stderr = '';
  const url = new Promise<string>((ok, fail) => {
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
      const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(stderr);
      if (m !== null) ok(m[1]!);
    });
    child.once('exit', (code) => fail(new Error(`${label} exited ${code}: ${stderr}`)));
  });
  return { child, url, stderr: () => stderr };
}

/** SIGTERM, then the exit code (at once if the process has already exited). */
export async function stopProcess(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null) return child.exitCode;
  const exit = new Promise<number | null>((r) => child.once('exit', r));
  child.kill('SIGTERM');
  return exit;
}
