import { configDefaults, defineConfig } from 'vitest/config';
import base, { RELIABILITY_FILES } from './vitest.config.ts';

/** `npm run test:reliability`: the long suites `npm test` leaves out (see RELIABILITY_FILES). */
export default defineConfig({
  ...base,
  test: { ...base.test, include: RELIABILITY_FILES, exclude: [...configDefaults.exclude] },
});
