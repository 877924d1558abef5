/**
 * `npx tsx bench/_heap-probe.ts [seconds 90] [workers 2]`: the V8 heap of the proxy's workers under
 * `bench proxy-load`'s 32 clients (the CLI proxy in a child process on a fresh SQLite vault, the
 * loopback upstream here), from `--trace-gc`: per worker, the most heap in use before and after a
 * full collection (Mark-Compact), against the worker's heap limit. `HP_ARGS` gives the proxy's
 * processes more Node flags (e.g. `--cpu-prof`, whose profile the heap also holds).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'undici';
import { loadProxyConfig, workerShare } from '../src/config/proxy.js';
import { Agent } from './proxy-load.js';
import { startChatUpstream } from './_support.js';

const seconds = Number(process.argv[2] ?? 90);
const workers = process.argv[3] ?? '2';
const extra = (process.env['HP_ARGS'] ?? '').split(/\s+/).filter((a) => a !== '');
const up = await startChatUpstream();
const dir = mkdtempSync(join(tmpdir(), 'tt-heap-probe-'));
const args = ['--trace-gc', ...extra, '--import', 'tsx', 'src/cli/main.ts', 'proxy', '--port', '0', '--quiet'];
args.push('--workers', workers, '--upstream', up.url, '--db', join(dir, 'vault.sqlite3'));
const child = spawn(process.execPath, args, {
  env: { PATH: process.env['PATH'] ?? '', HOME: dir, TOKEN_TERMINATOR_MAX_PAGE_CHARS: '200000' },
  stdio: ['ignore', 'pipe', 'pipe'],
  detached: true,
});
// Per process: [most in use before a full collection, most after one] (MB, as --trace-gc prints them).
const peaks = new Map<string, [number, number]>();
let pending = '';
child.stdout!.on('data', (c: Buffer) => {
  const lines = (pending + c.toString()).split('\n');
  pending = lines.pop()!;
  for (const line of lines) {
    const m = /^\[(\d+):.*Mark-Compact[^\d]*([\d.]+) \([\d.]+\) -> ([\d.]+)/.exec(line);
    if (m === null) continue;
    const [before, after] = peaks.get(m[1]!) ?? [0, 0];
    peaks.set(m[1]!, [Math.max(before, Number(m[2])), Math.max(after, Number(m[3]))]);
  }
});
let err = '';
const url = await new Promise<string>((ok, fail) => {
  child.stderr!.on('data', (c: Buffer) => {
    err = (err + c.toString()).slice(-16_384);
    const m = /listening on (http:\/\/[\d.]+:\d+)/.exec(err);
    if (m !== null) ok(m[1]!);
  });
  child.once('exit', (code) => fail(new Error(`proxy exited ${code}: ${err}`)));
});
let answers = 0;
let errors = 0;
const end = Date.now() + seconds * 1000;
await Promise.all(
  Array.from({ length: 32 }, async (_, i) => {
    const agent = new Agent(`c${i}`, 40);
    const client = new Client(url);
    while (Date.now() < end) {
      try {
        const res = await client.request({
          path: '/v1/chat/completions',
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-token-terminator-session': agent.session },
          body: agent.next(),
        });
        await res.body.dump();
        if (res.statusCode === 200) answers++;
        else errors++;
      } catch {
        errors++;
      }
    }
    await client.close();
  }),
);
// The CLI's own: half the worker's share of the default memory bound.
const share = workerShare(loadProxyConfig({ env: {}, flags: { workers } })).maxMemoryBytes;
console.log(
  `${answers} answers, ${errors} errors in ${seconds} s; heap limit per worker ${Math.floor(share / 2 / 2 ** 20)} MiB`,
);
for (const [pid, [before, after]] of peaks)
  console.log(`  process ${pid}: most heap in use before a full collection ${before} MB, after one ${after} MB`);
if (errors > 0) console.log(err);
process.kill(-child.pid!, 'SIGTERM');
up.server.close();
rmSync(dir, { recursive: true, force: true });
