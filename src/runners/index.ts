/**
 * The test runners, one family per file (js: vitest and jest; pytest; cargo; go; jvm: Maven and
 * Gradle). The compactor (src/compact/test-runners.ts), the failure-line classifier
 * (src/compact/diagnostic-lines.ts), the digests (src/compile/digest.ts) and the family detector
 * (src/tools/family.ts) read their rules here.
 */
import { cargo } from './cargo.js';
import { go } from './go.js';
import { jest, vitest } from './js.js';
import { gradle, maven } from './jvm.js';
import { pytest } from './pytest.js';
import type { RunnerRules } from './types.js';

export type { RunnerRules } from './types.js';

export type TestRunner = 'vitest' | 'jest' | 'pytest' | 'cargo' | 'go' | 'maven' | 'gradle';

/** Every runner's rules, in the order an output's shape is tried when its command says nothing. */
export const RUNNERS: Readonly<Record<TestRunner, RunnerRules>> = Object.freeze({
  vitest,
  jest,
  pytest,
  cargo,
  go,
  maven,
  gradle,
});

/** The failing-test-id patterns of every family, the first match of a line wins. */
export const FAILING_IDS: readonly RegExp[] = Object.freeze(
  [pytest, go, cargo, vitest, gradle, maven].flatMap((r) => r.failingIds),
);
