/**
 * What `token-terminator proxy` loads before it listens: the request path only. The report and
 * its chart and DOM packages, the PostgreSQL driver, tiktoken's WASM, the replay CLI's table and
 * progress packages and the other commands are loaded on first use, if ever. Checked on the real
 * command in a child process whose module loader logs every module it loads (no timing).
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { stopProcess } from '../support/proxy-process.js';
import { tempDir } from '../vault/helpers.js';

const ROOT = resolve(import.meta.dirname, '..', '..');
const REGISTER = resolve(ROOT, 'test/fixtures/module-log/register.mjs');

let dir: string;
let cleanup: () => void;
beforeEach(() => {
  ({ dir, cleanup } = tempDir());
});
afterEach(() => cleanup());

/** The modules the proxy had loaded when it printed its listening line. */
async function modulesAtListening(): Promise<string[]> {
  const log = join(dir, 'modules.log');
  const env: Record<string, string> = {
    PATH: process.env['PATH'] ?? '',
    HOME: dir,
    TT_MODULE_LOG: log,
  };
  const child = spawn(
    process.execPath,
    [
      '--import',
      REGISTER,
      'bin/token-terminator.js',
      'proxy',
      '--port',
      '0',
      '--workers',
      '1',
      '--quiet',
      '--db',
      join(dir, 'vault.sqlite3'),
    ],
    { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  await new Promise<void>((ok, fail) => {
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
      if (stderr.includes('listening on http://127.0.0.1:')) ok();
    });
    child.once('exit', (code) => fail(new Error(`proxy exited ${code}: ${stderr}`)));
  });
  // Without a build the launcher loads the source through tsx, which adds a query to each URL.
  const loaded = readFileSync(log, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((u) => u.split('?')[0]!);
  expect(await stopProcess(child)).toBe(0);
  return loaded;
}

describe('proxy start', () => {
  it('listens without loading the report, chart, DOM, PostgreSQL, WASM tokenizer or CLI table packages', async () => {
    const loaded = await modulesAtListening();
    // The request path itself was seen by the hook (it logs what it should).
    expect(loaded.some((u) => /\/adapters\/proxy\/server\.(ts|js)$/.test(u))).toBe(true);
    expect(loaded.some((u) => u.includes('/node_modules/kysely/'))).toBe(true);
    const unwanted = [
      // The /dashboard route itself is a thin module the command adds; it loads the report on a first request.
      /\/src\/report\/(?!dashboard\.)/,
      /\/node_modules\/@observablehq\//,
      /\/node_modules\/linkedom\//,
      /\/node_modules\/pg\//,
      /\/node_modules\/tiktoken\//,
      /\/node_modules\/@huggingface\//,
      /\/node_modules\/cli-table3\//,
      /\/node_modules\/cli-progress\//,
      /\/src\/cli\/commands\/(replay|report|bench|eval|stats|compare|artifact|status|vault)\./,
    ];
    expect(loaded.filter((u) => unwanted.some((p) => p.test(u)))).toEqual([]);
  });
});
