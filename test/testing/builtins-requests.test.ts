/**
 * The request-stream built-ins (collapseDuplicates, routeSkills, compileRequest) against every
 * invariant of the testing kit, with a real SQLite vault and the exact o200k counter. The cache
 * boundaries these operators declare are the points where their applied decisions change (a
 * history rewrite); between them renderings must be byte-stable. The fidelity invariants hold for
 * every one of them, opt-ins included (only skill routing rewrites the instruction prefix).
 */
import { test } from '@fast-check/vitest';
import fc from 'fast-check';
import { firstValueFrom, from, toArray, type OperatorFunction } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { compileRequest } from '../../operators/compile-request.js';
import { collapseDuplicates } from '../../operators/collapse-duplicates.js';
import { routeSkills } from '../../operators/route-skills.js';
import { createStep, type ProviderRequest, type Step } from '../../src/step.js';
import {
  decisionsChanged,
  growingSession,
  requestStream,
  testInvariants,
  withDeps,
  type InvariantName,
} from '../../src/testing/index.js';
import { propertyDeps, REQUEST_INVARIANTS } from '../support/properties.js';

const { vault, counter } = await propertyDeps();

const params = { numRuns: 10 };
const requests = requestStream({ maxLength: 2, maxTurns: 5 });
const sessions = growingSession({ maxTurns: 5 });
const isBoundary = decisionsChanged();

type Build = (deps: {
  vault: typeof vault;
  counter: typeof counter | undefined;
}) => OperatorFunction<Step<ProviderRequest>, Step<ProviderRequest>>;
const cases: [string, Build][] = [
  [
    'collapseDuplicates',
    ({ vault: v, counter: c }) => collapseDuplicates({ vault: v, ...(c === undefined ? {} : { counter: c }) }),
  ],
  [
    'collapseDuplicates (low threshold, bounded views)',
    ({ vault: v, counter: c }) =>
      collapseDuplicates({
        vault: v,
        ...(c === undefined ? {} : { counter: c }),
        minArtifactChars: 2_000,
        maxInlineChars: 3_000,
        inlineViewChars: 1_000,
      }),
  ],
  ['routeSkills', ({ vault: v, counter: c }) => routeSkills({ vault: v, ...(c === undefined ? {} : { counter: c }) })],
  [
    'compileRequest',
    ({ vault: v, counter: c }) => compileRequest({ vault: v, ...(c === undefined ? {} : { counter: c }) }),
  ],
  [
    'compileRequest (opt-ins: turn collapse, reasoning)',
    ({ vault: v, counter: c }) =>
      compileRequest({
        vault: v,
        ...(c === undefined ? {} : { counter: c }),
        minVaultChars: 500,
        collapseAfterTurns: 2,
        reasoning: true,
      }),
  ],
  [
    'compileRequest (fixed blocks)',
    ({ vault: v, counter: c }) =>
      compileRequest({ vault: v, ...(c === undefined ? {} : { counter: c }), minVaultChars: 500, blockTurns: 2 }),
  ],
];

for (const [name, buildOp] of cases) {
  describe(name, () => {
    const op = withDeps<ProviderRequest>((deps) => buildOp(deps));
    const inputs = name.startsWith('routeSkills') ? requestStream({ maxLength: 2, skills: 'always' }) : requests;
    testInvariants(test, op, { vault, counter, inputs, only: REQUEST_INVARIANTS, params });
    const fidelity: InvariantName[] = name.startsWith('routeSkills')
      ? ['actions-kept', 'no-dangling-reference']
      : ['prefix-kept', 'actions-kept', 'no-dangling-reference'];
    testInvariants(test, op, {
      vault,
      counter,
      inputs: sessions,
      only: ['cache-stable', ...fidelity],
      params,
      isBoundary,
    });
  });
}

/** Reasons of the `applied` decisions over a fixed sample: the properties above are not vacuous. */
async function appliedReasons(
  op: OperatorFunction<Step<ProviderRequest>, Step<ProviderRequest>>,
  inputs: fc.Arbitrary<readonly ProviderRequest[]>,
): Promise<string[]> {
  const reasons = new Set<string>();
  for (const [k, values] of fc.sample(inputs, { numRuns: 15, seed: 42 }).entries()) {
    const steps = values.map((v, i) => createStep(v, { sessionId: `coverage-${k}-${Date.now()}`, requestId: `r${i}` }));
    for (const out of await firstValueFrom(from(steps).pipe(op, toArray())))
      for (const d of out.decisions) if (d.kind === 'applied') reasons.add(d.stage);
  }
  return [...reasons];
}

describe('the kit inputs exercise the request built-ins', () => {
  it.each(cases)('%s applies on generated requests or sessions', async (name, buildOp) => {
    const op = buildOp({ vault, counter });
    // Duplicates count only among copies that arrive together: first requests of a session show them.
    const inputs = name.startsWith('routeSkills')
      ? requestStream({ maxLength: 2, skills: 'always' })
      : name.startsWith('collapseDuplicates')
        ? requestStream({ maxLength: 2, maxTurns: 5 })
        : sessions;
    const stages = await appliedReasons(op, inputs);
    // collapseDuplicates credits its bounded views apart from the duplicates it collapses.
    const own = name.startsWith('collapseDuplicates') ? ['boundedView', 'collapseDuplicates'] : [stages[0]];
    expect(stages.length).toBeGreaterThan(0);
    expect(stages.filter((s) => !own.includes(s))).toEqual([]);
  });
});
