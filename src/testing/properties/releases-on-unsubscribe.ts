import fc from 'fast-check';
import { Subject } from 'rxjs';
import type { Step } from '../../step.js';
import {
  baseDeps,
  build,
  InvariantViolation,
  isDepsAware,
  makeSteps,
  type InvariantOptions,
  type OperatorUnderTest,
  using,
} from '../harness.js';

/** When to unsubscribe in one run. */
export interface CutPlan {
  /** Inputs pushed before unsubscribing (clamped to 1…length). */
  readonly pushed: number;
  /** Wait until the operator holds a resource (or has answered every pushed input) before unsubscribing. */
  readonly waitForResource: boolean;
  /** Extra macrotask hops before unsubscribing (0–3): cuts at different points of async work. */
  readonly hops: number;
}

/**
 * Where to unsubscribe in one run: inputs pushed, whether to wait for a held resource, extra macrotask hops.
 *
 * @example
 * fc.sample(cutPlan(), 1); // e.g. { pushed: 3, waitForResource: true, hops: 1 }
 */
export function cutPlan(): fc.Arbitrary<CutPlan> {
  return fc.record({ pushed: fc.nat(8), waitForResource: fc.boolean(), hops: fc.nat(3) });
}

/** Options of the releases-on-unsubscribe invariant. */
export interface ReleaseOptions<T> extends InvariantOptions<T> {
  /** How long released resources may take to go away (a killed child must be reaped). @defaultValue 3,000 ms */
  readonly settleMs?: number;
}

const broken = (where: string, detail: string): InvariantViolation =>
  new InvariantViolation('releases-on-unsubscribe', where, detail);
const hop = (): Promise<void> => new Promise((r) => setImmediate(r));

/**
 * Unsubscription releases resources. The operator is built with the kit's resource probe (its
 * tracked spawn, timers, AbortControllers); inputs are pushed through a Subject, the subscriber
 * unsubscribes mid-flight, and within `settleMs` every tracked resource must be gone (children
 * exited and reaped, timers cleared, controllers aborted) and nothing may be emitted afterwards.
 */
export function releasesOnUnsubscribePredicate<T>(
  op: OperatorUnderTest<T>,
  options: ReleaseOptions<T>,
): (values: readonly T[], plan: CutPlan) => Promise<void> {
  if (!isDepsAware(op))
    throw new TypeError(
      'releasesOnUnsubscribe: the operator must receive the resource probe; wrap it with withDeps(({ probe, spawn }) => ...)',
    );
  return async (values, plan) => {
    const deps = baseDeps(options as InvariantOptions<unknown>);
    await using(build(op, deps), deps.probe, 'probe-first', async (operator) => {
      const steps = makeSteps(structuredClone(values) as T[], options.context);
      const pushed = Math.max(1, Math.min(steps.length, plan.pushed));
      const subject = new Subject<Step<T>>();
      let emitted = 0;
      let afterUnsubscribe = 0;
      let closed = false;
      const sub = subject.pipe(operator).subscribe({
        next: () => (closed ? (afterUnsubscribe += 1) : (emitted += 1)),
        error: () => undefined,
      });
      for (const step of steps.slice(0, pushed)) subject.next(step);
      if (plan.waitForResource) {
        const until = Date.now() + 2_000;
        while (deps.probe.live().length === 0 && emitted < pushed && Date.now() < until)
          await new Promise((r) => setTimeout(r, 5));
      }
      for (let i = 0; i < plan.hops; i++) await hop();
      const heldAtCut = deps.probe.live().length;
      closed = true;
      sub.unsubscribe();
      const left = await deps.probe.settle(options.settleMs ?? 3_000);
      if (left.length > 0)
        throw broken(
          `unsubscribe after ${pushed} input(s), ${emitted} answered, ${heldAtCut} resource(s) held`,
          `${left.length} resource(s) still live: ${left.map((r) => `${r.kind} ${r.detail}`).join('; ')}`,
        );
      if (afterUnsubscribe > 0)
        throw broken('after unsubscribe', `${afterUnsubscribe} Step(s) emitted after unsubscribing`);
    });
  };
}
