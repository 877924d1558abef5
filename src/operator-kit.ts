import { Observable, concatMap, defer, type OperatorFunction } from 'rxjs';
import { failOpen, type Step } from './step.js';

/**
 * One reduction applied to one Step. It receives an AbortSignal that fires when the subscriber
 * unsubscribes (or the Step's own signal aborts); it must release what it holds when it fires.
 * Returning `undefined` means "no change".
 */
export type StepReducer<T> = (step: Step<T>, signal: AbortSignal) => Promise<Step<T> | undefined> | Step<T> | undefined;

/**
 * Build an order-preserving, fail-open, cancellable operator from a reducer factory.
 *
 * The factory runs once per subscription, so per-run state (caches, memos) lives inside the
 * subscribe call and never in the operator factory. Any throw or rejection yields the incoming
 * Step unchanged plus a `failed_open` decision; the stream never errors because of a reduction.
 *
 * @example
 * const upper = (): OperatorFunction<Step<string>, Step<string>> =>
 *   stepOperator('upper', () => (step) => advance(step, step.value.toUpperCase(), { stage: 'upper', kind: 'applied', reason: 'demo' }));
 */
export function stepOperator<T>(stage: string, init: () => StepReducer<T>): OperatorFunction<Step<T>, Step<T>> {
  return (source) =>
    defer(() => {
      const reduce = init();
      return source.pipe(concatMap((step) => runReducer(stage, reduce, step)));
    });
}

function runReducer<T>(stage: string, reduce: StepReducer<T>, step: Step<T>): Observable<Step<T>> {
  return new Observable<Step<T>>((subscriber) => {
    const controller = new AbortController();
    const outer = step.signal;
    const onOuterAbort = (): void => controller.abort(outer?.reason);
    if (outer?.aborted) {
      subscriber.next(step);
      subscriber.complete();
      return undefined;
    }
    outer?.addEventListener('abort', onOuterAbort, { once: true });
    let result: Promise<Step<T> | undefined> | Step<T> | undefined;
    try {
      result = reduce(step, controller.signal);
    } catch (error) {
      result = Promise.reject(error);
    }
    if (!isThenable(result)) {
      // Synchronous reductions emit synchronously: no microtask hop on the hot path, and marble
      // tests in virtual time see them in the frame they arrived.
      outer?.removeEventListener('abort', onOuterAbort);
      subscriber.next(result ?? step);
      subscriber.complete();
      return undefined;
    }
    let settled = false;
    result.then(
      (out) => {
        settled = true;
        if (subscriber.closed) return;
        subscriber.next(out ?? step);
        subscriber.complete();
      },
      (error: unknown) => {
        settled = true;
        if (subscriber.closed) return;
        subscriber.next(controller.signal.aborted ? step : failOpen(step, stage, error));
        subscriber.complete();
      },
    );
    return () => {
      outer?.removeEventListener('abort', onOuterAbort);
      // A reduction that settled holds nothing to release: aborting it anyway cost an abort event
      // (and its DOMException) per stage per request.
      if (!settled) controller.abort();
    };
  });
}

function isThenable<V>(value: Promise<V> | V): value is Promise<V> {
  return typeof (value as { then?: unknown } | null | undefined)?.then === 'function';
}
