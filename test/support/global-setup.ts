/**
 * vitest globalSetup: a PostgreSQL server for the PostgreSQL half of the suite. Uses
 * TOKEN_TERMINATOR_TEST_PG_URL when set (.ci/run starts one and sets it); otherwise starts a
 * throw-away cluster from the machine's PostgreSQL binaries and stops it after the run. When
 * neither works the run FAILS here, loudly: the PostgreSQL tests are never skipped.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { startCluster, stopCluster } from './postgres.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Superuser URL of a database the tests may create schemas (and databases) in. */
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

export default async function setup(project: TestProject): Promise<(() => void) | undefined> {
  const given = process.env['TOKEN_TERMINATOR_TEST_PG_URL'];
  if (given !== undefined && given !== '') {
    await reachable(given);
    project.provide('pgUrl', given);
    return undefined;
  }
  // A directory directly in the world-writable tmp dir: the server runs as the postgres user when we are root.
  const dir = mkdtempSync(join(tmpdir(), 'tt-test-pg-'));
  let cluster;
  try {
    cluster = await startCluster(dir);
  } catch (error) {
    throw new Error(
      `the test suite needs PostgreSQL and could not start a throw-away server (set TOKEN_TERMINATOR_TEST_PG_URL to use one you run): ${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    );
  }
  project.provide('pgUrl', cluster.url);
  return () => stopCluster(dir);
}
