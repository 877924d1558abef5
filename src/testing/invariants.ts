/**
 * The invariants as fast-check properties (`invariants.*` for `fc.assert`), as
 * `[arbitraries, predicate]` pairs for `@fast-check/vitest`'s `test.prop` (`propertyTests.*`),
 * and as one call that registers every applicable property (`testInvariants`).
 */
import fc from 'fast-check';
import type { ProviderRequest } from '../step.js';
import {
  INVARIANT_TITLES,
  isDepsAware,
  type InvariantName,
  type InvariantOptions,
  type OperatorUnderTest,
} from './harness.js';
import { cacheStablePredicate, type CacheStableOptions } from './properties/cache-stable.js';
import { faultPlan, failsOpenPredicate, type FailsOpenOptions, type FaultPlan } from './properties/fails-open.js';
import { neverMutatesPredicate } from './properties/never-mutates.js';
import { recoversExactlyPredicate } from './properties/recovers-exactly.js';
import {
  cutPlan,
  releasesOnUnsubscribePredicate,
  type CutPlan,
  type ReleaseOptions,
} from './properties/releases-on-unsubscribe.js';
import { unchangedOrSmallerPredicate } from './properties/unchanged-or-smaller.js';
import { validRolesPredicate } from './properties/valid-roles.js';
import {
  actionsKeptPredicate,
  diagnosticsKeptPredicate,
  noDanglingReferencePredicate,
  prefixKeptPredicate,
} from './properties/fidelity.js';

/** Arbitraries and predicate in the shape `test.prop(arbitraries)(name, predicate)` takes. */
export type PropTuple<A extends unknown[]> = readonly [
  arbitraries: { [K in keyof A]: fc.Arbitrary<A[K]> },
  predicate: (...args: A) => Promise<void>,
];

type Inputs<T> = readonly T[];

/** The `[arbitraries, predicate]` of an invariant over provider requests. */
const onRequests =
  <O extends InvariantOptions<ProviderRequest> = InvariantOptions<ProviderRequest>>(
    predicate: (op: OperatorUnderTest<ProviderRequest>, o: O) => (values: Inputs<ProviderRequest>) => Promise<void>,
  ) =>
  (op: OperatorUnderTest<ProviderRequest>, o: O): PropTuple<[Inputs<ProviderRequest>]> => [
    [o.inputs],
    predicate(op, o),
  ];

/** The `[arbitraries, predicate]` of an invariant over any stream. */
const onStreams =
  (predicate: <T>(op: OperatorUnderTest<T>, o: InvariantOptions<T>) => (values: Inputs<T>) => Promise<void>) =>
  <T>(op: OperatorUnderTest<T>, o: InvariantOptions<T>): PropTuple<[Inputs<T>]> => [[o.inputs], predicate(op, o)];

/**
 * `[arbitraries, predicate]` per invariant, for `test.prop` of `@fast-check/vitest`.
 *
 * @example
 * const [arbs, check] = propertyTests.unchangedOrSmaller(myOperator(), { vault, inputs: toolResultStream() });
 * test.prop(arbs, { numRuns: 25 })('is unchanged or strictly smaller', check);
 */
export const propertyTests = {
  unchangedOrSmaller: onStreams(unchangedOrSmallerPredicate),
  neverMutates: onStreams(neverMutatesPredicate),
  recoversExactly: onStreams(recoversExactlyPredicate),
  failsOpen: <T>(op: OperatorUnderTest<T>, o: FailsOpenOptions<T>): PropTuple<[Inputs<T>, FaultPlan]> => [
    [o.inputs, faultPlan()],
    failsOpenPredicate(op, o),
  ],
  releasesOnUnsubscribe: <T>(op: OperatorUnderTest<T>, o: ReleaseOptions<T>): PropTuple<[Inputs<T>, CutPlan]> => [
    [o.inputs, cutPlan()],
    releasesOnUnsubscribePredicate(op, o),
  ],
  cacheStable: onRequests<CacheStableOptions>(cacheStablePredicate),
  validRoles: onRequests(validRolesPredicate),
  prefixKept: onRequests(prefixKeptPredicate),
  actionsKept: onRequests(actionsKeptPredicate),
  noDanglingReference: onRequests(noDanglingReferencePredicate),
  diagnosticsKept: onRequests(diagnosticsKeptPredicate),
};

function asProperty<A extends unknown[]>([arbitraries, predicate]: PropTuple<A>): fc.IAsyncProperty<A> {
  return fc.asyncProperty(
    ...(arbitraries as unknown as [fc.Arbitrary<unknown>]),
    predicate as (...a: unknown[]) => Promise<void>,
  ) as unknown as fc.IAsyncProperty<A>;
}

const requestProperty =
  <O>(tuple: (op: OperatorUnderTest<ProviderRequest>, o: O) => PropTuple<[Inputs<ProviderRequest>]>) =>
  (op: OperatorUnderTest<ProviderRequest>, o: O) =>
    asProperty(tuple(op, o));

/**
 * Each invariant as an `fc.asyncProperty`, for `fc.assert`. Pass `includeErrorInReport: true`
 * (or use {@link assertInvariant}) so the report names the broken invariant.
 *
 * @example
 * await fc.assert(invariants.recoversExactly(op, { vault, inputs: requestStream() }), { numRuns: 20, includeErrorInReport: true });
 */
export const invariants = {
  unchangedOrSmaller: <T>(op: OperatorUnderTest<T>, o: InvariantOptions<T>) =>
    asProperty(propertyTests.unchangedOrSmaller(op, o)),
  neverMutates: <T>(op: OperatorUnderTest<T>, o: InvariantOptions<T>) => asProperty(propertyTests.neverMutates(op, o)),
  recoversExactly: <T>(op: OperatorUnderTest<T>, o: InvariantOptions<T>) =>
    asProperty(propertyTests.recoversExactly(op, o)),
  failsOpen: <T>(op: OperatorUnderTest<T>, o: FailsOpenOptions<T>) => asProperty(propertyTests.failsOpen(op, o)),
  releasesOnUnsubscribe: <T>(op: OperatorUnderTest<T>, o: ReleaseOptions<T>) =>
    asProperty(propertyTests.releasesOnUnsubscribe(op, o)),
  cacheStable: requestProperty(propertyTests.cacheStable),
  validRoles: requestProperty(propertyTests.validRoles),
  /** The instruction prefix reaches the output unchanged and in place (docs/fidelity.md). */
  prefixKept: requestProperty(propertyTests.prefixKept),
  /** Every assistant action of the input is present verbatim in the output. */
  actionsKept: requestProperty(propertyTests.actionsKept),
  /** No delta, receipt or digest refers to what the conversation was not shown. */
  noDanglingReference: requestProperty(propertyTests.noDanglingReference),
  /** Every digest keeps the failing test ids and diagnostic lines of its output (up to 50, then their count). */
  diagnosticsKept: requestProperty(propertyTests.diagnosticsKept),
};

/**
 * `fc.assert` with the violation in the report and modest defaults (25 runs).
 *
 * @example
 * await assertInvariant(fc.asyncProperty(requestStream(), async (requests) => { … }), { numRuns: 50 });
 */
export async function assertInvariant<A extends unknown[]>(
  property: fc.IAsyncProperty<A>,
  params: fc.Parameters<A> = {},
): Promise<void> {
  await fc.assert(property, { numRuns: 25, includeErrorInReport: true, ...params });
}

/**
 * The part of `@fast-check/vitest`'s `test` (or `it`) that {@link testInvariants} uses. Typed
 * loosely on purpose: the kit does not import `@fast-check/vitest`, it only calls `test.prop`.
 */
export interface PropTestApi {
  prop(arbitraries: never, params?: never): (name: string, predicate: never, timeout?: number) => void;
}

/** Options of {@link testInvariants}: those of every invariant it registers plus which ones and how hard. */
export interface TestInvariantsOptions<T> extends ReleaseOptions<T>, FailsOpenOptions<T> {
  /**
   * Which invariants to register. cache-stable, valid-roles and the fidelity invariants
   * prefix-kept, actions-kept, no-dangling-reference and diagnostics-kept (request streams) are opt-in.
   *
   * @defaultValue unchanged-or-smaller, never-mutates and recovers-exactly, plus fails-open and
   * releases-on-unsubscribe when the operator is built with {@link withDeps}
   */
  readonly only?: readonly InvariantName[];
  /** fast-check parameters for every property. @defaultValue `{ numRuns: 20 }` */
  readonly params?: fc.Parameters<unknown[]>;
  /** Where cache-stable lets an earlier part of the prompt change ({@link CacheStableOptions}). @defaultValue never */
  readonly isBoundary?: CacheStableOptions['isBoundary'];
  /** Vitest timeout per property. @defaultValue 60,000 ms */
  readonly timeout?: number;
}

/**
 * Register one `test.prop` per invariant for an operator.
 *
 * @example
 * import { test } from '@fast-check/vitest';
 * testInvariants(test, withDeps(({ vault }) => dropNoisyOutput({ tools: ['noisy_probe'], vault })), { vault, inputs: toolResultStream() });
 */
export function testInvariants<T>(
  test: PropTestApi,
  op: OperatorUnderTest<T>,
  options: TestInvariantsOptions<T>,
): void {
  const base: InvariantName[] = ['unchanged-or-smaller', 'never-mutates', 'recovers-exactly'];
  const names = options.only ?? (isDepsAware(op) ? [...base, 'fails-open', 'releases-on-unsubscribe'] : base);
  const params = { numRuns: 20, ...options.params };
  const timeout = options.timeout ?? 60_000;
  for (const name of names) {
    // `propertyTests` by the camelCase of the name; the request invariants take the same objects, typed for requests.
    const tuple =
      propertyTests[name.replace(/-(\w)/g, (_, c: string) => c.toUpperCase()) as keyof typeof propertyTests];
    if (tuple === undefined) continue;
    const [arbs, predicate] = (tuple as (op: unknown, o: unknown) => PropTuple<unknown[]>)(op, options);
    test.prop(arbs as never, params as never)(INVARIANT_TITLES[name], predicate as never, timeout);
  }
}
