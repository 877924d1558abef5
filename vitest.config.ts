import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const here = (path: string): string => fileURLToPath(new URL(path, import.meta.url));

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
    pool: 'forks',
    // A PostgreSQL server for the PostgreSQL half of the suite (fails the run when none can be had).
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
