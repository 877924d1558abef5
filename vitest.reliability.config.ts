import { configDefaults, defineConfig } from 'vitest/config';
import base, { RELIABILITY_FILES } from './vitest.config.ts';

/** `npm run test:reliability`: the long suites `npm test` leaves out (see RELIABILITY_FILES). */
export default defineConfig({
  ...base,
  // Each file in a fresh module graph (npm test shares one per worker): these suites are few and
  // long, and kill and restart processes, so the import time saved would be small.
  test: { ...base.test, include: RELIABILITY_FILES, exclude: [...configDefaults.exclude], isolate: true },
});
