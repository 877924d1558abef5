/** A real proxy (real Terminator on a temp vault) in front of a scripted loopback upstream. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createProxy, type Proxy, type ProxyLogRecord, type ProxyOptions } from '../../../adapters/proxy/index.js';
import type { ConfigOverrides } from '../../../src/config/index.js';
import { loadProxyConfig } from '../../../src/config/proxy.js';
import { referencedArtifacts } from '../../../src/receipts/index.js';
import { dashboardRoute } from '../../../src/report/dashboard.js';
import { startUpstream, type Script, type ToolCallSpec, type Upstream } from './upstream.js';

export interface Harness {
  readonly proxy: Proxy;
  readonly upstream: Upstream;
  /** Proxy base URL (no /v1). */
  readonly url: string;
  readonly dbPath: string;
  readonly logs: ProxyLogRecord[];
  close(): Promise<void>;
}

export interface HarnessOptions {
  readonly overrides?: ConfigOverrides;
  readonly proxy?: Partial<ProxyOptions>;
  readonly flags?: Record<string, string | number>;
  /** Reuse this directory (its vault) instead of a fresh one; it is then not removed. */
  readonly dir?: string;
  /** Serve the report page at GET /dashboard as the gateway command does (default true). */
  readonly dashboard?: boolean;
}

export async function startHarness(script: Script, options: HarnessOptions = {}): Promise<Harness> {
  const upstream = await startUpstream(script);
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'tt-proxy-'));
  const dbPath = join(dir, 'vault.sqlite3');
  const logs: ProxyLogRecord[] = [];
  const proxy = await createProxy({
    config: loadProxyConfig({
      env: {},
      flags: {
        port: 0,
        upstream: upstream.url,
        anthropicUpstream: upstream.url,
        // The proxy runs inside the test process, whose RSS counts every test file the worker has
        // loaded (vitest runs files in one process): the memory bound is held by the tests that set
        // it (test/integration/proxy-bounds.test.ts), not by every test that happens to run late.
        workers: 1,
        maxMemoryBytes: 2 ** 40,
        ...options.flags,
      },
    }),
    terminatorOptions: { env: {}, overrides: { dbPath, maxPageChars: 200_000, ...options.overrides } },
    log: (r) => logs.push(r),
    ...options.proxy,
  });
  if (options.dashboard !== false && options.proxy?.routes?.['/dashboard'] === undefined)
    proxy.route('/dashboard', dashboardRoute(proxy.terminator, proxy.metrics));
  const url = await proxy.listen();
  return {
    proxy,
    upstream,
    url,
    dbPath,
    logs,
    close: async () => {
      await proxy.close();
      await upstream.close();
      if (options.dir === undefined) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A large, compressible terminal output (a passing test run). */
export function testRunOutput(lines = 1500, seed = 0): string {
  return Array.from(
    { length: lines },
    (_, i) => `test/case_${seed}_${i}.spec.ts: PASS (${(i * 7 + seed) % 97}ms)`,
  ).join('\n');
}

/** The first artifact id a recorded request body names. */
export function firstArtifact(body: unknown): string | undefined {
  return referencedArtifacts(JSON.stringify(body).replace(/\\n/g, '\n'))[0];
}

/**
 * The model's call to the recovery tool for the first artifact `body` names (`'none'` where it names
 * none), whole: the scripted upstream's first reply in a recovery round.
 */
export function recoveryCall(body: unknown): ToolCallSpec {
  return {
    id: 'tt-1',
    name: 'token_terminator',
    args: { action: 'artifact_get', artifact_id: firstArtifact(body) ?? 'none', limit: 200_000 },
  };
}
