/**
 * Deferred vault maintenance (SQLite FTS indexing, WAL checkpoints) kept off the agent's requests:
 * better-sqlite3 runs on the event loop, so a step during a reduction adds its whole cost to it. A task
 * runs once no reduction is in flight (src/activity.ts) and the store has been quiet for `quietMs`;
 * after `maxWaitMs` at the first turn with none in flight; after {@link BUSY_WAIT_FACTOR} × that in any.
 */
import type { ActivityReading } from '../activity.js';

/** Longest a task waits for a turn with no reduction in flight (a host always reducing), in multiples of `maxWaitMs`. */
const BUSY_WAIT_FACTOR = 5;
const NO_ACTIVITY: ActivityReading = Object.freeze({ inFlight: 0, lastEnded: Number.NEGATIVE_INFINITY });
/** How often an overdue task looks for a turn with no reduction in flight, in ms. */
const OVERDUE_POLL_MS = 1;

export interface IdleGate {
  /** The store ran a statement now. */
  mark(): void;
  /**
   * Run `task` once the process is idle (or it has waited `maxWaitMs`). A task already waiting is
   * not queued twice; a throwing task is dropped without affecting the others.
   */
  defer(task: () => void): void;
  /** Drop the waiting tasks; later defers are ignored. */
  close(): void;
}

export interface IdleGateOptions {
  /** Quiet time wanted after the store's last statement and the last reduction, in ms. */
  readonly quietMs: number;
  /** Longest a task waits for quiet, in ms; then it runs at the first turn with no reduction in flight. */
  readonly maxWaitMs: number;
  /** Clock in ms (tests). Default `performance.now`. */
  readonly now?: () => number;
  /**
   * Reductions in flight and when the last ended: the Terminator's that opened the store.
   *
   * @defaultValue none in flight, ever (the store waits for its own quiet only)
   */
  readonly activity?: () => ActivityReading;
}

/**
 * A gate for one store.
 *
 * @example
 * const gate = createIdleGate({ quietMs: 25, maxWaitMs: 1000 });
 * gate.defer(() => indexStep());
 */
export function createIdleGate(options: IdleGateOptions): IdleGate {
  const now = options.now ?? (() => performance.now());
  const maxBusyWaitMs = options.maxWaitMs * BUSY_WAIT_FACTOR;
  const activity = options.activity ?? (() => NO_ACTIVITY);
  let lastStatement = Number.NEGATIVE_INFINITY;
  let waitingSince = 0;
  const waiting = new Set<() => void>();
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  const arm = (ms: number): void => {
    timer = setTimeout(fire, Math.max(1, Math.ceil(ms)));
    timer.unref();
  };
  const fire = (): void => {
    timer = undefined;
    if (closed || waiting.size === 0) return;
    const t = now();
    const { inFlight, lastEnded } = activity();
    const waited = t - waitingSince;
    const quietLeft = inFlight > 0 ? options.quietMs : Math.max(lastStatement, lastEnded) + options.quietMs - t;
    const due = quietLeft <= 0 || (waited >= options.maxWaitMs && inFlight === 0) || waited >= maxBusyWaitMs;
    if (!due)
      return arm(
        waited >= options.maxWaitMs
          ? Math.min(OVERDUE_POLL_MS, maxBusyWaitMs - waited)
          : Math.min(quietLeft, options.maxWaitMs - waited),
      );
    const tasks = [...waiting];
    waiting.clear();
    for (const task of tasks) {
      try {
        task();
      } catch {
        // Maintenance is best effort: the queue stays, the next write defers it again.
      }
    }
  };
  return {
    mark() {
      lastStatement = now();
    },
    defer(task) {
      if (closed || waiting.has(task)) return;
      if (waiting.size === 0) waitingSince = now();
      waiting.add(task);
      if (timer === undefined) arm(options.quietMs);
    },
    close() {
      closed = true;
      waiting.clear();
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
    },
  };
}
