/**
 * `npx tsx bench/_cap-probe.ts [seconds 60] [vault bytes 67108864]`: an in-process proxy (SQLite
 * vault in a temp dir, the configuration the CLI resolves for one worker, `vaultMaxBytes` as given)
 * under bench proxy-load's 32 growing conversations, printing every 5 s the answers and errors so
 * far, this process's CPU and RSS and the vault file's size (an error is printed whole, the first
 * three of them). With a small vault the load fills it with evidence the
 * live sessions were delivered (pinned, so retention cannot prune it) and the answers per 5 s
 * show what serving costs once the vault refuses new outputs (RELIABILITY.md, "A full vault").
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'undici';
import { createProxy } from '../adapters/proxy/index.js';
import { loadProxyConfig } from '../src/config/proxy.js';
import { sendNext, startChatUpstream } from './_support.js';
import { Agent } from './proxy-load.js';

const [seconds, vaultMaxBytes] = [Number(process.argv[2] ?? 60), Number(process.argv[3] ?? 64 * 2 ** 20)];
if (!(seconds > 0 && Number.isSafeInteger(vaultMaxBytes) && vaultMaxBytes > 0))
  throw new Error(`usage: bench/_cap-probe.ts [seconds > 0] [vault bytes, a positive integer]`);
const { server: upstream, url: upstreamUrl } = await startChatUpstream();
const dir = mkdtempSync(join(tmpdir(), 'tt-cap-probe-'));
const db = join(dir, 'vault.sqlite3');
const proxy = await createProxy({
  config: loadProxyConfig({ env: {}, flags: { port: 0, workers: 1, upstream: upstreamUrl } }),
  terminatorOptions: { env: { HOME: dir }, overrides: { dbPath: db, vaultMaxBytes } },
  // The proxy's warnings (a handler failed, a slow body closed): why a client saw an error.
  log: (record) => {
    if (record.level !== 'info') console.error(JSON.stringify(record));
  },
});
const url = await proxy.listen();
const agents = Array.from({ length: 32 }, (_, i) => new Agent(`c${i}`, 40));
const clients = agents.map(() => new Client(url));
let answers = 0;
let errors = 0;
let before = 0;
const tick = setInterval(() => {
  const cpu = process.cpuUsage();
  console.log(
    `${answers - before} answers in 5 s (${answers} in all, ${errors} errors); CPU ${((cpu.user + cpu.system) / 1e6).toFixed(1)} s; ` +
      `RSS ${(process.memoryUsage.rss() / 2 ** 20).toFixed(0)} MiB; vault file ${(statSync(db).size / 2 ** 20).toFixed(0)} MiB`,
  );
  before = answers;
}, 5000);
const end = performance.now() + seconds * 1000;
await Promise.all(
  agents.map(async (agent, i) => {
    while (performance.now() < end) {
      try {
        await sendNext(clients[i]!, agent, 'Bearer sk-cap-probe');
        answers++;
      } catch (error) {
        // Printed whole, once each: a probe that dies on the first error measures nothing.
        if (errors++ < 3) console.error(error);
      }
    }
  }),
);
clearInterval(tick);
await Promise.all(clients.map((c) => c.close()));
await proxy.close();
upstream.close();
rmSync(dir, { recursive: true, force: true });
