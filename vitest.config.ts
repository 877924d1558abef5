import { fileURLToPath } from 'node:url';
import { configDefaults, defineConfig } from 'vitest/config';

const here = (path: string): string => fileURLToPath(new URL(path, import.meta.url));

/**
 * The long reliability suites (soak, crash, multi-host, replicas, fault matrix, …): not in
 * `npm test`, run by `npm run test:reliability` (vitest.reliability.config.ts) and by .ci/run.
 */
export const RELIABILITY_FILES = [
  'test/reliability/**/*.test.ts',
  // Many processes on one vault file, and killed writers: minutes of child processes each.
  'test/vault/processes.test.ts',
  'test/vault/crash.test.ts',
];

export default defineConfig({
  // The examples import the package by name, as a user would; in the repo that is the source
  // (tsconfig.json `paths` does the same for tsc and tsx). CI also runs them against the packed tarball.
  resolve: {
    alias: [
      { find: /^token-terminator$/, replacement: here('./src/index.ts') },
      { find: /^token-terminator\/operators$/, replacement: here('./operators/index.ts') },
      { find: /^token-terminator\/testing$/, replacement: here('./src/testing/index.ts') },
      { find: /^token-terminator\/report$/, replacement: here('./src/report/index.ts') },
      { find: /^token-terminator\/adapters\/([a-z-]+)$/, replacement: `${here('./adapters')}/$1/index.ts` },
    ],
  },
  test: {
    include: ['test/**/*.test.ts', 'examples/**/*.test.ts'],
    exclude: [...configDefaults.exclude, ...RELIABILITY_FILES],
    pool: 'forks',
    // One module graph per worker, not one per test file: importing src anew for each of ~140
    // files was half of the suite's CPU time (vitest's import figure 522 s → 98 s on a busy 2-core
    // machine). Test files therefore share modules: a test that changes process-wide state (env,
    // timers, globals, listeners) restores it in its own afterEach/finally, as they all do.
    isolate: false,
    // Prints the run's estimated duration; a PostgreSQL server for the PostgreSQL half of the suite
    // (skipped in one line without server binaries, except under CI, where that fails the run).
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
