/**
 * `token-terminator proxy --quiet` drops the log line of each request but keeps the warnings: a
 * gateway that closed a client or failed open must say why, quiet or not (a CI failure of
 * proxy-memory once had nothing on stderr to tell). The real CLI in a child process; the
 * upstream is a port nothing listens on, so the request's warning is `upstream_failed`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { spawnProxy, stopProcess } from '../support/proxy-process.js';

const dir = mkdtempSync(join(tmpdir(), 'tt-proxy-quiet-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A loopback port that was free a moment ago and has nothing listening. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const { port } = server.address() as { port: number };
  await new Promise<void>((ok) => server.close(() => ok()));
  return port;
}

describe('token-terminator proxy --quiet', () => {
  it('writes no line per request and still writes the warning of a request that failed upstream', async () => {
    const proxy = spawnProxy(
      ['--upstream', `http://127.0.0.1:${await closedPort()}`, '--db', join(dir, 'vault.sqlite3'), '--quiet'],
      { PATH: process.env['PATH'] ?? '', HOME: dir },
      'proxy --quiet',
    );
    try {
      const url = await proxy.url;
      const res = await fetch(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer sk-quiet' },
        body: JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hello' }] }),
      });
      await res.text();
      expect(res.status).toBeGreaterThanOrEqual(500);
      expect(await stopProcess(proxy.child)).toBe(0);
      const lines = proxy
        .stderr()
        .split('\n')
        .filter((l) => l.startsWith('{'));
      expect(lines.some((l) => l.includes('"event":"upstream_failed"'))).toBe(true);
      expect(lines.filter((l) => l.includes('"level":"info"') && !l.includes('worker_ready'))).toEqual([]);
    } finally {
      if (proxy.child.exitCode === null) proxy.child.kill('SIGKILL');
    }
  }, 60_000);
});
