import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { proxyTerminatorConfig } from '../../src/cli/commands/proxy.js';
import { ConfigError } from '../../src/errors.js';
import { chat, startUpstream } from '../proxy/support/upstream.js';
import { spawnProxy, stopProcess } from '../support/proxy-process.js';

const ROOT = resolve(import.meta.dirname, '..', '..');
const dir = mkdtempSync(join(tmpdir(), 'tt-proxy-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const env = (extra: Record<string, string> = {}): Record<string, string> => ({
  PATH: process.env['PATH'] ?? '',
  HOME: dir,
  ...extra,
});

function cli(args: string[], extra: Record<string, string> = {}): Promise<{ code: number; stderr: string }> {
  return new Promise((done) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'src/cli/main.ts', ...args],
      { cwd: ROOT, env: env(extra) },
      (error, _stdout, stderr) => {
        done({ code: error ? (typeof error.code === 'number' ? error.code : -1) : 0, stderr: String(stderr) });
      },
    );
  });
}

describe('token-terminator proxy', () => {
  it('rejects bad settings naming the flag or variable (exit 2)', async () => {
    const port = await cli(['proxy', '--port', 'eighty']);
    expect(port.code).toBe(2);
    expect(port.stderr).toContain('--port must be an integer in 0…65535, got "eighty"');
    const host = await cli(['proxy'], { TOKEN_TERMINATOR_PROXY_HOST: '0.0.0.0' });
    expect(host.code).toBe(2);
    expect(host.stderr).toContain('TOKEN_TERMINATOR_PROXY_TOKEN');
    const both = await cli(['proxy', '--db', join(dir, 'a.sqlite3'), '--db-url', 'postgres://localhost/tt']);
    expect(both.code).not.toBe(0);
  });

  it('takes the PostgreSQL URL from the flag or the variable, and the SQLite file from --db', () => {
    expect(proxyTerminatorConfig({ dbUrl: 'postgres://localhost/tt' }, { HOME: dir }).dbUrl).toBe(
      'postgres://localhost/tt',
    );
    expect(proxyTerminatorConfig({}, { HOME: dir, TOKEN_TERMINATOR_DB_URL: 'postgres://localhost/tt' }).dbUrl).toBe(
      'postgres://localhost/tt',
    );
    expect(() => proxyTerminatorConfig({ dbUrl: 'mysql://localhost/tt' }, { HOME: dir })).toThrow(ConfigError);
    expect(proxyTerminatorConfig({ db: join(dir, 'x.sqlite3') }, { HOME: dir }).dbPath).toBe(join(dir, 'x.sqlite3'));
  });

  it('serves until SIGTERM: health, a proxied request, the dashboard, a clean exit', async () => {
    const upstream = await startUpstream(() => chat.text('pong'));
    const proxy = spawnProxy(['--upstream', upstream.url, '--db', join(dir, 'vault.sqlite3')], env());
    try {
      const url = await proxy.url;
      expect(await (await fetch(`${url}/healthz`)).json()).toEqual({ status: 'ok' });
      const reply = await fetch(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer sk-cli' },
        body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'ping' }] }),
      });
      expect(
        ((await reply.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content,
      ).toBe('pong');
      // The command adds the report page (the proxy adapter alone does not import the report).
      const page = await fetch(`${url}/dashboard`);
      expect(page.status).toBe(200);
      expect(page.headers.get('content-type')).toContain('text/html');
      expect(await page.text()).toContain('token-terminator proxy');
      expect(await stopProcess(proxy.child)).toBe(0);
      expect(proxy.stderr()).not.toContain('sk-cli');
    } finally {
      if (proxy.child.exitCode === null) proxy.child.kill('SIGKILL');
      await upstream.close();
    }
  });
});
