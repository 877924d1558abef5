/**
 * The machinery every invariant shares: how an operator under test gets its dependencies, how a
 * generated stream becomes Steps, how a stream is run, and how a broken invariant is reported.
 */
import { randomUUID } from 'node:crypto';
import type fc from 'fast-check';
import { from, type OperatorFunction } from 'rxjs';
import type { TokenCounter } from '../measure/types.js';
import { createStep, type Step, type StepContext } from '../step.js';
import type { Vault } from '../vault/types.js';
import { createResourceProbe, type ResourceProbe } from './probe.js';

/** The invariants the kit checks, each with the test title `testInvariants` registers it under. */
export const INVARIANT_TITLES = {
  'unchanged-or-smaller': 'output is unchanged or strictly smaller',
  'never-mutates': 'never mutates caller objects',
  'recovers-exactly': 'every receipt recovers exactly',
  'fails-open': 'fails open when a dependency throws',
  'releases-on-unsubscribe': 'releases resources on unsubscribe',
  'cache-stable': 'renders cache-stably over a growing session',
  'valid-roles': 'keeps roles valid for the format',
  'prefix-kept': 'keeps the instruction prefix unchanged and in place',
  'actions-kept': 'keeps every assistant action verbatim',
  'no-dangling-reference': 'refers only to what the conversation was shown',
  'diagnostics-kept': 'keeps every failing test id and diagnostic line in digests',
} as const;
/** One of the invariants the kit checks. */
export type InvariantName = keyof typeof INVARIANT_TITLES;

/** Thrown by an invariant's predicate; fast-check's report carries its message. */
export class InvariantViolation extends Error {
  readonly code = 'E_INVARIANT';
  constructor(
    readonly invariant: InvariantName,
    readonly where: string,
    readonly detail: string,
  ) {
    super(`invariant "${invariant}" broken at ${where}: ${detail}`);
    this.name = 'InvariantViolation';
  }
}

/** What an operator under test may depend on. Fault-injecting invariants pass broken versions. */
export interface KitDeps {
  readonly vault: Vault;
  /** The exact counter from the options (a throwing one under `fails-open`); undefined when none was given. */
  readonly counter: TokenCounter | undefined;
  /** Tracked resources (spawn, timers, AbortControllers); under `fails-open` its spawn is replaced by a throwing one. */
  readonly probe: ResourceProbe;
  /** `child_process.spawn`-compatible: the probe's tracked spawn, or a throwing one under `fails-open`. */
  readonly spawn: ResourceProbe['spawn'];
}

/** A built operator plus what to release after a run (e.g. a Terminator's `close`). */
export interface BuiltOperator<T> {
  readonly operator: OperatorFunction<Step<T>, Step<T>>;
  readonly dispose?: () => void | Promise<void>;
}

/** Builds an operator from the kit's dependencies (vault, counter, resource probe, spawner). */
export type OperatorFactory<T> = (
  deps: KitDeps,
) =>
  | OperatorFunction<Step<T>, Step<T>>
  | BuiltOperator<T>
  | Promise<OperatorFunction<Step<T>, Step<T>> | BuiltOperator<T>>;

const FACTORY = Symbol.for('token-terminator/testing.factory');

/** An operator built per run from the kit's dependencies. Create with {@link withDeps}. */
export interface DepsAwareOperator<T> {
  readonly [FACTORY]: OperatorFactory<T>;
}

/** What every invariant accepts: a ready operator (or composed pipeline), or one built from the kit's dependencies. */
export type OperatorUnderTest<T> = OperatorFunction<Step<T>, Step<T>> | DepsAwareOperator<T>;

/**
 * Let the kit build the operator for each run, so it can inject a faulty vault, a throwing
 * counter or a tracked spawn. Needed by `fails-open` and `releases-on-unsubscribe`.
 *
 * @example
 * const op = withDeps(({ vault, counter }) => compressToolResult({ vault, counter }));
 */
export function withDeps<T>(factory: OperatorFactory<T>): DepsAwareOperator<T> {
  return { [FACTORY]: factory };
}

/** True when the operator under test was wrapped with {@link withDeps}, so the kit builds it per run. */
export function isDepsAware<T>(op: OperatorUnderTest<T>): op is DepsAwareOperator<T> {
  return typeof op === 'object' && op !== null && FACTORY in op;
}

/** Options every invariant takes. */
export interface InvariantOptions<T> {
  /** The real vault receipts must recover from. */
  readonly vault: Vault;
  /** The generated input streams (each run pushes one array through one subscription). */
  readonly inputs: fc.Arbitrary<readonly T[]>;
  /** An exact counter: sizes are then also compared in tokens. @defaultValue chars only */
  readonly counter?: TokenCounter;
  /** Context fields for every Step. @defaultValue a fresh `sessionId` per run, `requestId` per Step */
  readonly context?: Partial<StepContext>;
  /** Longest wait for a run's stream to complete. @defaultValue 20,000 ms */
  readonly timeoutMs?: number;
}

/** The dependencies one run gets: the caller's vault and counter, and a fresh resource probe whose `spawn` is tracked. */
export function baseDeps(options: InvariantOptions<unknown>): KitDeps {
  const probe = createResourceProbe();
  return { vault: options.vault, counter: options.counter, probe, spawn: probe.spawn };
}

/** Build (or take) the operator for one run. */
export async function build<T>(op: OperatorUnderTest<T>, deps: KitDeps): Promise<Required<BuiltOperator<T>>> {
  if (!isDepsAware(op)) return { operator: op, dispose: () => undefined };
  const built = await op[FACTORY](deps);
  if (typeof built === 'function') return { operator: built, dispose: () => undefined };
  return { operator: built.operator, dispose: built.dispose ?? (() => undefined) };
}

/** Steps for one run: a fresh session per run so per-session state (leases, baselines) never leaks between runs. */
export function makeSteps<T>(values: readonly T[], context: Partial<StepContext> | undefined): Step<T>[] {
  // A random id, not a process-wide counter: runs of any harness in any process never share a session.
  const run = randomUUID();
  return values.map((value, i) =>
    createStep(value, {
      sessionId: `kit-${run}`,
      requestId: `kit-${run}-${i}`,
      ...(context === undefined ? {} : structuredClone(context)),
    }),
  );
}

/** What one run produced: the Steps that came out, and whether the stream errored or completed. */
export interface RunResult<T> {
  readonly outputs: Step<T>[];
  readonly error: unknown;
  readonly errored: boolean;
  readonly completed: boolean;
}

/** Push Steps through one subscription and collect what comes out, bounded by a deadline. */
export function runSteps<T>(
  operator: OperatorFunction<Step<T>, Step<T>>,
  steps: readonly Step<T>[],
  timeoutMs = 20_000,
): Promise<RunResult<T>> {
  return new Promise((resolve) => {
    const outputs: Step<T>[] = [];
    let settled = false;
    const finish = (r: Omit<RunResult<T>, 'outputs'>): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ outputs, ...r });
    };
    const timer = setTimeout(() => {
      sub.unsubscribe();
      finish({ error: undefined, errored: false, completed: false });
    }, timeoutMs);
    const sub = from(steps)
      .pipe(operator)
      .subscribe({
        next: (s) => void outputs.push(s),
        error: (error: unknown) => finish({ error, errored: true, completed: false }),
        complete: () => finish({ error: undefined, errored: false, completed: true }),
      });
  });
}

/** Content-free name of an error for messages. */
export function describeError(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return typeof code === 'string' ? `${error.name} (${code})` : error.name;
  }
  return String(error);
}

/** The stages that applied something to a Step, for "where" in a report. */
export function stagesOf(step: Step<unknown> | undefined): string {
  if (step === undefined) return 'no output';
  const applied = step.decisions.filter((d) => d.kind === 'applied').map((d) => d.stage);
  return applied.length === 0 ? 'no stage applied' : `applied by ${[...new Set(applied)].join(', ')}`;
}

/**
 * The common run checks: the stream completed without error and emitted one Step per input, in
 * order (each output carries its input's `original`, as Steps built with `advance`/`note` do).
 */
export function checkRun<T>(invariant: InvariantName, result: RunResult<T>, steps: readonly Step<T>[]): void {
  const broken = (detail: string, where = 'the stream'): InvariantViolation =>
    new InvariantViolation(invariant, where, detail);
  const emitted = result.outputs.length;
  if (result.errored)
    throw broken(`errored with ${describeError(result.error)}; an operator must fail open, never error the stream`);
  if (!result.completed)
    throw broken(`did not complete within the deadline (${emitted} of ${steps.length} Steps emitted)`);
  if (emitted !== steps.length) throw broken(`emitted ${emitted} Steps for ${steps.length} inputs`);
  result.outputs.forEach((out, i) => {
    if (out.original !== steps[i]!.original)
      throw broken(`output is not the Step of input ${i} (order changed or original replaced)`, `step ${i}`);
  });
}

/** Hand a built operator to `use`, then release it and the probe in `order` (`probe-first`: leaks killed first). */
export async function using<T, R>(
  built: Promise<Required<BuiltOperator<T>>>,
  probe: ResourceProbe,
  order: 'operator-first' | 'probe-first',
  use: (operator: OperatorFunction<Step<T>, Step<T>>) => Promise<R>,
): Promise<R> {
  const { operator, dispose } = await built;
  try {
    return await use(operator);
  } finally {
    if (order === 'probe-first') probe.dispose();
    await dispose();
    if (order === 'operator-first') probe.dispose();
  }
}

/** A stream invariant's run: fresh dependencies, cloned values, the common run checks, then `check`; always released. */
export async function checkedRun<T>(
  invariant: InvariantName,
  op: OperatorUnderTest<T>,
  options: InvariantOptions<T>,
  values: readonly T[],
  check: (steps: Step<T>[], result: RunResult<T>) => Promise<void> | void,
): Promise<void> {
  const deps = baseDeps(options as InvariantOptions<unknown>);
  await using(build(op, deps), deps.probe, 'operator-first', async (operator) => {
    const steps = makeSteps(structuredClone(values) as T[], options.context);
    const result = await runSteps(operator, steps, options.timeoutMs);
    checkRun(invariant, result, steps);
    await check(steps, result);
  });
}
