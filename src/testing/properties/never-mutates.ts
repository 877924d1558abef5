import type { Step } from '../../step.js';
import { deepFreeze, firstDifference } from '../deep.js';
import {
  baseDeps,
  build,
  describeError,
  InvariantViolation,
  makeSteps,
  runSteps,
  type InvariantOptions,
  type OperatorUnderTest,
  using,
} from '../harness.js';

/**
 * Caller objects are never mutated. Two runs: one on plain copies compared afterwards with a
 * `structuredClone` snapshot (catches silent writes), one on deep-frozen copies (a write throws:
 * caught here whether it errors the stream or turns into a new `failed_open` TypeError decision).
 */
export function neverMutatesPredicate<T>(
  op: OperatorUnderTest<T>,
  options: InvariantOptions<T>,
): (values: readonly T[]) => Promise<void> {
  return async (values) => {
    const snapshot = structuredClone(values);
    // Run 1: plain objects, compared after the run.
    const plain = makeSteps(structuredClone(values) as T[], options.context);
    const contexts = plain.map((s) => structuredClone(s.context));
    const first = await once(op, options, plain);
    plain.forEach((step, i) => {
      const diff = firstDifference(snapshot[i], step.value) ?? firstDifference(contexts[i], step.context);
      if (diff !== undefined) throw broken(`step ${i}`, `the caller's object was mutated: ${diff}`);
    });
    // Run 2: deep-frozen Steps and values.
    const frozen = makeSteps(structuredClone(values) as T[], options.context).map((s) => deepFreeze(s));
    const second = await once(op, options, frozen);
    if (second.errored && second.error instanceof TypeError)
      throw broken(
        'the stream',
        `errored with TypeError on deep-frozen input (a write to a caller object) where plain input ${first.errored ? 'also errored' : 'did not'}`,
      );
    second.outputs.forEach((out, i) => {
      const before = new Set(failedTypeErrors(first.outputs[i]));
      const added = failedTypeErrors(out).filter((stage) => !before.has(stage));
      if (added.length > 0)
        throw broken(
          `step ${i}`,
          `stage ${added.join(', ')} failed open with TypeError only on deep-frozen input (it writes to caller objects)`,
        );
    });
  };
}

const broken = (where: string, detail: string): InvariantViolation =>
  new InvariantViolation('never-mutates', where, detail);

function failedTypeErrors(step: Step<unknown> | undefined): string[] {
  return (step?.decisions ?? [])
    .filter((d) => d.kind === 'failed_open' && (d.error ?? '').startsWith('TypeError'))
    .map((d) => d.stage);
}

async function once<T>(op: OperatorUnderTest<T>, options: InvariantOptions<T>, steps: Step<T>[]) {
  const deps = baseDeps(options as InvariantOptions<unknown>);
  return using(build(op, deps), deps.probe, 'operator-first', (operator) =>
    runSteps(operator, steps, options.timeoutMs).catch((error: unknown) => {
      throw broken('the stream', `threw ${describeError(error)} while subscribing`);
    }),
  );
}
