/** One test file's rig for the README snippets: a temp dir, the limits server and a real Terminator on a vault there. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { createTerminator } from '../../../src/runtime/index.js';
import type { Terminator } from '../../../src/runtime/types.js';
import { startLimitsServer, type LimitsServer } from './limits-server.js';

export interface LimitsRig {
  /** The temp directory (vault and ledger live there). */
  readonly dir: string;
  readonly server: LimitsServer;
  readonly terminator: Terminator;
  /** The requests `call` produced (the server is shared by the file). */
  sent<T>(call: () => Promise<T>): Promise<{ result: T; requests: LimitsServer['requests'] }>;
}

/** Starts the rig before the file's tests (temp dir named `prefix…`) and closes it after them. */
export function useLimitsRig(prefix: string): LimitsRig {
  let dir: string | undefined;
  let server: LimitsServer | undefined;
  let terminator: Terminator | undefined;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), prefix));
    server = await startLimitsServer();
    terminator = await createTerminator({
      env: {},
      overrides: { dbPath: join(dir, 'vault.sqlite3'), ledgerPath: join(dir, 'ledger.sqlite3') },
    });
  });
  afterAll(async () => {
    await terminator?.close();
    await server?.close();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });
  const rig: LimitsRig = {
    get dir() {
      return dir!;
    },
    get server() {
      return server!;
    },
    get terminator() {
      return terminator!;
    },
    async sent(call) {
      const before = rig.server.requests.length;
      const result = await call();
      return { result, requests: rig.server.requests.slice(before) };
    },
  };
  return rig;
}
