/**
 * `npx token-terminator proxy` and `npm test` run as npm → `sh -c` → node. A SIGTERM to npm's pid
 * (what a supervisor, `kill` or a CI step's timeout sends) reaches the shell, which dies without
 * passing it on, and node, re-parented, went on serving with its workers or its PostgreSQL server.
 * When npm started the process (npm sets `npm_command` for every script and for `npx`), finding
 * itself re-parented counts as that SIGTERM: the process raises it on itself, so its own SIGTERM
 * handling runs (the proxy closes and stops its workers, the test run stops PostgreSQL).
 */

export interface FollowLauncherOptions {
  /** Where `npm_command` is looked up. @defaultValue `process.env` */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** The current parent pid. @defaultValue `() => process.ppid` */
  readonly ppid?: () => number;
  /** Runs `check` repeatedly until the returned function is called. @defaultValue every second, unref'd */
  readonly every?: (check: () => void) => () => void;
  /** What to do once the launcher is gone. @defaultValue SIGTERM to this process */
  readonly onGone?: () => void;
}

const everySecond = (check: () => void): (() => void) => {
  const timer = setInterval(check, 1000);
  timer.unref();
  return () => clearInterval(timer);
};

/**
 * Stop with npm: returns the function that stops watching (a no-op when npm did not start us).
 *
 * @example
 * followLauncher(); // in a CLI entry point, before serving
 */
export function followLauncher(options: FollowLauncherOptions = {}): () => void {
  const env = options.env ?? process.env;
  if (env['npm_command'] === undefined || env['npm_command'] === '') return () => undefined;
  const ppid = options.ppid ?? (() => process.ppid);
  const onGone = options.onGone ?? (() => process.kill(process.pid, 'SIGTERM'));
  const parent = ppid();
  let cancel: (() => void) | undefined;
  let gone = false;
  cancel = (options.every ?? everySecond)(() => {
    if (gone || ppid() === parent) return;
    gone = true;
    cancel?.();
    onGone();
  });
  return () => {
    gone = true;
    cancel?.();
    cancel = undefined;
  };
}
