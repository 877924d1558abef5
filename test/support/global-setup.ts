/**
 * vitest globalSetup, for `npm test` and `npm run test:reliability`:
 *
 * - prints how long the run will take (test/support/estimate.ts);
 * - a PostgreSQL server for the PostgreSQL half of the suite. Uses TOKEN_TERMINATOR_TEST_PG_URL
 *   when set (.ci/run starts one and sets it); otherwise starts a throw-away cluster from the
 *   machine's PostgreSQL binaries and stops it after the run — also when the run is interrupted
 *   (SIGINT, SIGTERM, SIGHUP). Without server binaries the PostgreSQL tests are skipped, said in
 *   one plain line; under CI (CI set) that is a failure instead, loudly;
 * - under npm, a SIGTERM to npm's pid stops the run and its server too (src/cli/launcher.ts: the
 *   shell between npm and vitest dies without passing the signal on).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { followLauncher } from '../../src/cli/launcher.js';
import { estimateLine } from './estimate.js';
import { findBinDir, startCluster, stopOnExit } from './postgres.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Superuser URL of a database the tests may create schemas (and databases) in; '' = none (skipped). */
    pgUrl: string;
  }
}

async function reachable(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  try {
    await client.connect();
    await client.query('CREATE EXTENSION IF NOT EXISTS pg_trgm');
  } catch (error) {
    throw new Error(
      `TOKEN_TERMINATOR_TEST_PG_URL is set but unusable for the PostgreSQL tests: ${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    );
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** The test file filters on the command line (`npm test -- test/vault`), for the estimate. */
function filters(): string[] {
  const args = process.argv.slice(2);
  const out: string[] = [];
  const withValue = new Set(['-c', '--config', '--project', '-t', '--testNamePattern', '--root', '-r', '--dir']);
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (withValue.has(a)) i++;
    else if (!a.startsWith('-') && a !== 'run') out.push(a);
  }
  return out;
}

async function printEstimate(project: TestProject): Promise<void> {
  try {
    const { testFiles } = await project.globTestFiles(filters());
    const label = project.config.include.some((g) => g.includes('reliability'))
      ? 'npm run test:reliability'
      : 'npm test';
    const workers = Number(project.config.maxWorkers) || undefined;
    console.log(estimateLine(label, testFiles, workers));
  } catch {
    // An estimate is a courtesy: never a reason for a run to fail.
  }
}

export default async function setup(project: TestProject): Promise<(() => void) | undefined> {
  followLauncher();
  await printEstimate(project);
  const given = process.env['TOKEN_TERMINATOR_TEST_PG_URL'];
  if (given !== undefined && given !== '') {
    await reachable(given);
    project.provide('pgUrl', given);
    return undefined;
  }
  const ci = process.env['CI'] !== undefined && process.env['CI'] !== '' && process.env['CI'] !== 'false';
  if (!ci) {
    try {
      findBinDir();
    } catch (error) {
      console.log(
        `PostgreSQL tests skipped: ${error instanceof Error ? error.message : String(error)} (under CI they are required)`,
      );
      project.provide('pgUrl', '');
      return undefined;
    }
  }
  // A directory directly in the world-writable tmp dir: the server runs as the postgres user when we are root.
  const dir = mkdtempSync(join(tmpdir(), 'tt-test-pg-'));
  // Registered before the start: an interrupt during initdb or pg_ctl start still removes it all.
  const stop = stopOnExit(dir);
  let cluster;
  try {
    cluster = await startCluster(dir);
  } catch (error) {
    stop();
    rmSync(dir, { recursive: true, force: true });
    throw new Error(
      `the test suite needs PostgreSQL and could not start a throw-away server (set TOKEN_TERMINATOR_TEST_PG_URL to use one you run): ${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    );
  }
  project.provide('pgUrl', cluster.url);
  return stop;
}
