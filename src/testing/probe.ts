/**
 * A resource probe: hands an operator tracked versions of what it may hold (child processes,
 * timers, AbortControllers, anything else via `track`) and counts what is still live. The
 * unsubscription invariant unsubscribes mid-flight and waits for the count to return to zero.
 */
import { spawn as nodeSpawn, type ChildProcess } from 'node:child_process';

/** One live resource, described without content. */
export interface LiveResource {
  readonly kind: 'child' | 'timer' | 'abort-controller' | string;
  readonly detail: string;
}

/** Tracked stand-ins for the resources an operator may hold (children, timers, abort controllers), so a test can see what is still live. */
export interface ResourceProbe {
  /** `child_process.spawn`, tracked: a child is live until it has exited (been reaped). */
  readonly spawn: typeof nodeSpawn;
  /** `setTimeout`, tracked: live until it fires or is cleared with the probe's `clearTimeout`. */
  setTimeout(callback: () => void, ms: number): NodeJS.Timeout;
  clearTimeout(handle: NodeJS.Timeout | undefined): void;
  /** An AbortController that stays live until it is aborted (teardown should abort it). */
  abortController(): AbortController;
  /** Track anything else; live until `release()`. */
  track(kind: string, detail?: string): { release(): void };
  /** What is live now. */
  live(): readonly LiveResource[];
  /** Resolves once nothing is live, or after `deadlineMs` with what is still live. */
  settle(deadlineMs?: number): Promise<readonly LiveResource[]>;
  /** Kill leaked children and clear leaked timers (cleanup after a failed check). */
  dispose(): void;
}

/**
 * Create a probe. Give its members to the operator under test through the operator's options.
 *
 * @example
 * const probe = createResourceProbe();
 * const op = rewriteTerminalCommand({ spawn: probe.spawn });
 */
export function createResourceProbe(): ResourceProbe {
  const live = new Map<object, LiveResource>();
  const children = new Set<ChildProcess>();
  const timers = new Set<NodeJS.Timeout>();

  const spawn = ((...args: Parameters<typeof nodeSpawn>) => {
    const child = (nodeSpawn as (...a: unknown[]) => ChildProcess)(...args);
    const key = {};
    live.set(key, { kind: 'child', detail: `pid ${child.pid ?? '?'} (${String(args[0])})` });
    children.add(child);
    const done = (): void => {
      live.delete(key);
      children.delete(child);
    };
    // 'exit' means the child was reaped; 'error' without exit means it never started.
    child.once('exit', done);
    child.once('error', () => {
      if (child.pid === undefined) done();
    });
    return child;
  }) as typeof nodeSpawn;

  const probe: ResourceProbe = {
    spawn,
    setTimeout(callback, ms) {
      const handle = setTimeout(() => {
        live.delete(handle);
        timers.delete(handle);
        callback();
      }, ms);
      live.set(handle, { kind: 'timer', detail: `${ms} ms` });
      timers.add(handle);
      return handle;
    },
    clearTimeout(handle) {
      if (handle === undefined) return;
      clearTimeout(handle);
      live.delete(handle);
      timers.delete(handle);
    },
    abortController() {
      const controller = new AbortController();
      live.set(controller, { kind: 'abort-controller', detail: 'not aborted' });
      controller.signal.addEventListener('abort', () => live.delete(controller), { once: true });
      return controller;
    },
    track(kind, detail = '') {
      const key = {};
      live.set(key, { kind, detail });
      return { release: () => void live.delete(key) };
    },
    live: () => [...live.values()],
    async settle(deadlineMs = 3_000) {
      const until = Date.now() + deadlineMs;
      while (live.size > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
      return [...live.values()];
    },
    dispose() {
      for (const child of children) child.kill('SIGKILL');
      for (const t of timers) clearTimeout(t);
      timers.clear();
    },
  };
  return probe;
}
