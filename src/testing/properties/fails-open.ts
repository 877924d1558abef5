import fc from 'fast-check';
import { firstDifference, sameData } from '../deep.js';
import { faultyVault, throwingCounter, throwingSpawn, VAULT_METHODS, type VaultMethod } from '../faults.js';
import {
  baseDeps,
  build,
  checkRun,
  InvariantViolation,
  isDepsAware,
  makeSteps,
  runSteps,
  type InvariantOptions,
  type KitDeps,
  type OperatorUnderTest,
  using,
} from '../harness.js';
import { checkRecovery } from './recovers-exactly.js';

/** Which dependencies fail in one run. */
export interface FaultPlan {
  /** Failing vault methods; 'all' = every method. */
  readonly vault: readonly VaultMethod[] | 'all';
  readonly counterThrows: boolean;
  readonly spawnThrows: boolean;
  readonly mode: 'reject' | 'throw';
}

/**
 * Every dependency broken (weighted up: it is the strict case) or a random subset.
 *
 * @example
 * fc.sample(faultPlan(), 1); // e.g. { vault: 'all', counterThrows: true, spawnThrows: false, mode: 'reject' }
 */
export function faultPlan(): fc.Arbitrary<FaultPlan> {
  const all = fc.record({
    vault: fc.constant('all' as const),
    counterThrows: fc.constant(true),
    spawnThrows: fc.constant(true),
    mode: fc.constantFrom('reject' as const, 'throw' as const),
  });
  const some = fc.record({
    vault: fc.subarray([...VAULT_METHODS], { minLength: 1 }),
    counterThrows: fc.boolean(),
    spawnThrows: fc.boolean(),
    mode: fc.constantFrom('reject' as const, 'throw' as const),
  });
  return fc.oneof({ arbitrary: all, weight: 3 }, { arbitrary: some, weight: 1 });
}

const isTotal = (p: FaultPlan): boolean => p.vault === 'all' && p.counterThrows && p.spawnThrows;

/** Options of the fails-open invariant. */
export interface FailsOpenOptions<T> extends InvariantOptions<T> {
  /**
   * When every dependency throws, require the output to equal the input. Set false for an operator
   * with a documented fallback that needs no dependency (it is then held to: no stream error, one
   * Step per input, everything recoverable).
   *
   * @defaultValue true
   */
  readonly expectUnchanged?: boolean;
}

/**
 * Fail-open when a dependency throws: the operator is built with the plan's faulty vault, throwing
 * counter and throwing spawn; the stream must never error and must emit one Step per input. When
 * every dependency is broken, each output value deep-equals its input and no stage reports
 * `applied` (a `failed_open`, `skipped` or no decision is fine; `expectUnchanged: false` waives
 * this); otherwise whatever the operator still did must recover exactly from the real vault.
 */
export function failsOpenPredicate<T>(
  op: OperatorUnderTest<T>,
  options: FailsOpenOptions<T>,
): (values: readonly T[], plan: FaultPlan) => Promise<void> {
  if (!isDepsAware(op))
    throw new TypeError(
      'failsOpen: the operator must be built from the kit dependencies; wrap it with withDeps((deps) => ...)',
    );
  const broken = (where: string, detail: string): InvariantViolation =>
    new InvariantViolation('fails-open', where, detail);
  return async (values, plan) => {
    const base = baseDeps(options as InvariantOptions<unknown>);
    const deps: KitDeps = {
      vault: faultyVault(options.vault, { failOn: plan.vault, mode: plan.mode }),
      counter: plan.counterThrows ? throwingCounter() : options.counter,
      probe: base.probe,
      spawn: plan.spawnThrows ? (throwingSpawn() as unknown as KitDeps['spawn']) : base.spawn,
    };
    // Building may validate options, never touch a dependency: a throw here is a defect too.
    const built = build(op, deps).catch((error: unknown) => {
      throw broken(
        'operator construction',
        `threw ${String((error as Error)?.name ?? error)} with broken dependencies`,
      );
    });
    await using(built, base.probe, 'operator-first', async (operator) => {
      const steps = makeSteps(structuredClone(values) as T[], options.context);
      const result = await runSteps(operator, steps, options.timeoutMs);
      checkRun('fails-open', result, steps);
      for (const [i, out] of result.outputs.entries()) {
        const input = steps[i]!;
        const added = out.decisions.slice(input.decisions.length);
        if (isTotal(plan) && options.expectUnchanged !== false) {
          if (!sameData(input.value, out.value))
            throw broken(
              `step ${i}`,
              `every dependency threw, yet the output differs from the input: ${firstDifference(input.value, out.value)}`,
            );
          const applied = added.filter((d) => d.kind === 'applied').map((d) => d.stage);
          if (applied.length > 0)
            throw broken(`step ${i}`, `every dependency threw, yet ${applied.join(', ')} reported applied`);
        } else {
          const where = `step ${i} with faults in ${plan.vault === 'all' ? 'every vault method' : plan.vault.join(', ')}`;
          const seen = steps.slice(0, i + 1).map((s) => s.value);
          await checkRecovery(options.vault, seen, out, where).catch((error: unknown) => {
            throw error instanceof InvariantViolation
              ? broken(where, `what the operator still did does not recover: ${error.detail}`)
              : error;
          });
        }
      }
    });
  };
}
