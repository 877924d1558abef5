import { Observable, concatMap, defer, finalize, type OperatorFunction } from 'rxjs';
import { SessionCache, type Session } from './session/session-cache.js';
import { failOpen, type Step } from './step.js';

/**
 * One reduction applied to one Step. It receives an AbortSignal that fires when the subscriber
 * unsubscribes (or the Step's own signal aborts); it must release what it holds when it fires.
 * Returning `undefined` means "no change".
 */
export type StepReducer<T> = (step: Step<T>, signal: AbortSignal) => Promise<Step<T> | undefined> | Step<T> | undefined;

/** A reduction over one Step that reads and writes its session's state (src/session/session-cache.ts). */
export type SessionReducer<T> = (
  step: Step<T>,
  session: Session,
  signal: AbortSignal,
) => Promise<Step<T> | undefined> | Step<T> | undefined;

/** A stage opened for one run: its reducer, and what closing the run releases. */
export interface OpenStage<T> {
  readonly reduce: SessionReducer<T>;
  close?(): Promise<void> | void;
}

/**
 * A stage: a name (its decisions' and failures' stage) and how to open a run of it. A run holds
 * what is shared by every session it serves (a counter, a planner); what is a session's lives in
 * the Session handed to each call. The runtime opens a run once and calls it directly; the
 * operator face opens one per subscription.
 */
export interface Stage<T> {
  readonly name: string;
  open(): OpenStage<T>;
}

/** An operator that is also a stage: the runtime composes `stage`, a caller pipes the operator. */
export type StageOperator<T> = OperatorFunction<Step<T>, Step<T>> & { readonly stage: Stage<T> };

/** Sessions an operator used alone keeps per subscription (least recently used dropped). */
const OPERATOR_SESSIONS = 64;

/**
 * The operator face of a stage: each subscription opens a run and keeps its own sessions, steps
 * go through in order, fail open, and unsubscribing cancels the step in flight and closes the run.
 *
 * @example
 * const op = stageOperator({ name: 'count', open: () => ({ reduce: (step, session) => { session.seenItems++; return undefined; } }) });
 */
export function stageOperator<T>(stage: Stage<T>, maxSessions = OPERATOR_SESSIONS): StageOperator<T> {
  const op: OperatorFunction<Step<T>, Step<T>> = (source) =>
    defer(() => {
      const run = stage.open();
      const sessions = new SessionCache(maxSessions);
      const reduce: StepReducer<T> = (step, signal) => run.reduce(step, sessions.of(step.context), signal);
      return source.pipe(
        concatMap((step) => runReducer(stage.name, reduce, step)),
        finalize(() => {
          sessions.clear();
          void Promise.resolve(run.close?.()).catch(() => undefined);
        }),
      );
    });
  return Object.assign(op, { stage });
}

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
export function stepOperator<T>(stage: string, init: () => StepReducer<T>): StageOperator<T> {
  return stageOperator({
    name: stage,
    open: () => {
      const reduce = init();
      return { reduce: (step, _session, signal) => reduce(step, signal) };
    },
  });
}

/**
 * Stages one after the other as one stage, each failing open on its own (its name on the
 * decision); a Step whose signal aborted skips the stages after. Synchronous while every stage is.
 *
 * @example
 * const pipeline = chainStages('runtime', [dedupe.stage, compile.stage]);
 */
export function chainStages<T>(name: string, stages: readonly Stage<T>[]): Stage<T> {
  return {
    name,
    open() {
      const runs = stages.map((s) => ({ name: s.name, run: s.open() }));
      const from = (i: number, step: Step<T>, session: Session, signal: AbortSignal): Step<T> | Promise<Step<T>> => {
        for (let k = i; k < runs.length; k++) {
          if (signal.aborted || step.signal?.aborted) return step;
          const { name: stageName, run } = runs[k]!;
          let out: ReturnType<SessionReducer<T>>;
          try {
            out = run.reduce(step, session, signal);
          } catch (error) {
            step = failOpen(step, stageName, error);
            continue;
          }
          if (isThenable(out)) {
            const before = step;
            return out.then(
              (next) => from(k + 1, next ?? before, session, signal),
              (error: unknown) =>
                from(k + 1, signal.aborted ? before : failOpen(before, stageName, error), session, signal),
            );
          }
          step = out ?? step;
        }
        return step;
      };
      return {
        reduce: (step, session, signal) => from(0, step, session, signal),
        async close() {
          for (const { run } of runs) await Promise.resolve(run.close?.()).catch(() => undefined);
        },
      };
    },
  };
}

function runReducer<T>(stage: string, reduce: StepReducer<T>, step: Step<T>): Observable<Step<T>> {
  return new Observable<Step<T>>((subscriber) => {
    const controller = new AbortController();
    const outer = step.signal;
    const onOuterAbort = (): void => controller.abort(outer?.reason);
    const emit = (out: Step<T>): undefined => {
      subscriber.next(out);
      subscriber.complete();
      return undefined;
    };
    if (outer?.aborted) return emit(step);
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
      return emit(result ?? step);
    }
    let settled = false;
    result.then(
      (out) => {
        settled = true;
        if (!subscriber.closed) emit(out ?? step);
      },
      (error: unknown) => {
        settled = true;
        if (!subscriber.closed) emit(controller.signal.aborted ? step : failOpen(step, stage, error));
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
