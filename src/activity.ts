/**
 * Reductions in flight for one Terminator. The event loop is shared: a vault's maintenance
 * (indexing queued content, checkpointing the WAL) that starts while a reduction awaits something
 * runs inside that reduction's time. The runtime counts each Step from when it enters one of its
 * pipelines until its output leaves ({@link countReductions}), and the vault it opens defers its
 * maintenance (src/vault/idle.ts) until none is in flight. Owned by the Terminator, not the
 * process: two Terminators count apart, and a vault opened on its own waits only for quiet.
 */
import { defer, finalize, tap, type OperatorFunction } from 'rxjs';

/** What deferred maintenance reads: reductions in flight, and when (performance.now ms) the last one ended. */
export interface ActivityReading {
  readonly inFlight: number;
  readonly lastEnded: number;
}

/**
 * A count of reductions in flight.
 *
 * @example
 * const activity = new ReductionActivity();
 * const end = activity.begin();
 * try { await work(); } finally { end(); }
 * activity.inFlight; // 0 again
 */
export class ReductionActivity implements ActivityReading {
  #inFlight = 0;
  #lastEnded = Number.NEGATIVE_INFINITY;

  /** @param now - clock in ms (tests). Default `performance.now`. */
  constructor(private readonly now: () => number = () => performance.now()) {}

  get inFlight(): number {
    return this.#inFlight;
  }

  get lastEnded(): number {
    return this.#lastEnded;
  }

  /** Count one reduction as started; the returned function ends it (once, whatever the number of calls). */
  begin(): () => void {
    this.#inFlight++;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.#inFlight--;
      this.#lastEnded = this.now();
    };
  }
}

/**
 * `op` with each element counted in `activity` from when it enters until its output leaves, for
 * operators that emit exactly one output per input in order (every `stepOperator` chain); what is
 * still in flight when the subscription ends stops counting then.
 *
 * @example
 * const counted = countReductions(activity, requestPipeline);
 */
export function countReductions<A, B>(activity: ReductionActivity, op: OperatorFunction<A, B>): OperatorFunction<A, B> {
  return (source) =>
    defer(() => {
      const ends: (() => void)[] = [];
      return source.pipe(
        tap(() => ends.push(activity.begin())),
        op,
        tap(() => ends.shift()?.()),
        finalize(() => {
          for (const end of ends.splice(0)) end();
        }),
      );
    });
}
