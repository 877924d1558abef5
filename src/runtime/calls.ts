/**
 * How the Promise facades run a call: the pipeline's stages directly, with the call's Session, after
 * the session's earlier calls of the same kind (a stage reads and writes its session's state, so
 * calls of one kind take turns). An aborted call answers at once with its input (the stages see the
 * abort through their signal); closing answers every call in flight with its input and cancels its work.
 */
import type { ReductionActivity } from '../activity.js';
import type { OpenStage } from '../operator-kit.js';
import type { CallKind, SessionCache } from '../session/session-cache.js';
import { failOpen, note, type Step } from '../step.js';

export class Calls {
  readonly #shutdown = new AbortController();

  /** @param activity - where each call is counted in flight until its stages are done (src/activity.ts). */
  constructor(
    private readonly sessions: SessionCache,
    private readonly activity?: ReductionActivity,
  ) {}

  /** Run one Step through `stage` with its session; never rejects. */
  run<T>(kind: CallKind, stage: OpenStage<T>, step: Step<T>): Promise<Step<T>> {
    const shutdown = this.#shutdown.signal;
    const skipped = (reason: string): Step<T> => note(step, { stage: `runtime:${kind}`, kind: 'skipped', reason });
    if (shutdown.aborted) return Promise.resolve(skipped('runtime closed'));
    if (step.signal?.aborted) return Promise.resolve(skipped('aborted'));
    const session = this.sessions.of(step.context);
    const end = this.activity?.begin();
    return new Promise<Step<T>>((resolve) => {
      let settled = false;
      const onAbort = (): void => settle(skipped('aborted'));
      const onClose = (): void => settle(skipped('runtime closed'));
      const settle = (out: Step<T>): void => {
        if (settled) return;
        settled = true;
        step.signal?.removeEventListener('abort', onAbort);
        shutdown.removeEventListener('abort', onClose);
        resolve(out);
      };
      step.signal?.addEventListener('abort', onAbort, { once: true });
      shutdown.addEventListener('abort', onClose, { once: true });
      session
        .inTurn(kind, async () => {
          if (step.signal?.aborted || shutdown.aborted) return step;
          const signal = step.signal === undefined ? shutdown : AbortSignal.any([shutdown, step.signal]);
          return (await stage.reduce(step, session, signal)) ?? step;
        })
        .then(settle, (error: unknown) => settle(failOpen(step, `runtime:${kind}`, error)))
        .finally(() => end?.());
    });
  }

  /** Answer every call in flight with its input, cancel their work, and take no more. */
  close(): void {
    this.#shutdown.abort();
  }
}
