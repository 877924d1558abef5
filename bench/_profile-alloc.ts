/**
 * `npx tsx bench/_profile-alloc.ts [--seconds 15] [--clients 32] [--promoted]`: what the gateway allocates per
 * answer under bench proxy-load's conversations, by function. One in-process proxy (SQLite vault
 * in a temp dir, the configuration the CLI resolves for one worker) in front of a loopback
 * upstream; `--clients` agents send growing conversations for 10 s untimed, then for `--seconds`
 * under V8's sampling heap profiler, counting objects the collector has already freed too (every
 * allocation, not what is alive at the end; `--promoted`: only what outlived the young generation,
 * which is what the full collections mark). Prints KiB per answer: the total, the top functions
 * by their own allocations (a builtin named with its caller) and by inclusive allocations (our
 * code and its dependencies). The load generator's own allocations (`bench/proxy-load.ts`) are in
 * the figures: read them apart.
 *
 * Why allocations: a worker's collector work runs partly on V8's helper threads, which one worker
 * gets for free beside its main thread and two workers on two cores do not (bench proxy-load's
 * ratio), and what survives the young generation while a request waits is what the major
 * collections mark.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'undici';
import { createProxy } from '../adapters/proxy/index.js';
import { loadProxyConfig } from '../src/config/proxy.js';
import { sendNext, startChatUpstream } from './_support.js';
import { Agent } from './proxy-load.js';

interface HeapNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: HeapNode[];
}

const argv = process.argv.slice(2);
const option = (name: string, fallback: number): number => {
  const i = argv.indexOf(name);
  const n = i >= 0 ? Number(argv[i + 1]) : fallback;
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`${name} must be a positive integer, got ${argv[i + 1]}`);
  return n;
};
const seconds = option('--seconds', 15);
const clientCount = option('--clients', 32);
/** Only what outlived the young generation (promoted, then freed by a full collection or still alive). */
const promoted = argv.includes('--promoted');

const { server: upstream, url: upstreamUrl } = await startChatUpstream();
const dir = mkdtempSync(join(tmpdir(), 'tt-profile-alloc-'));
const proxy = await createProxy({
  config: loadProxyConfig({
    env: {},
    flags: { port: 0, workers: 1, upstream: upstreamUrl },
  }),
  terminatorOptions: { env: { HOME: dir }, overrides: { dbPath: join(dir, 'vault.sqlite3') } },
});
const url = await proxy.listen();
const agents = Array.from({ length: clientCount }, (_, i) => new Agent(`c${i}`, 40));
const clients = agents.map(() => new Client(url));
let answers = 0;
const drive = async (ms: number): Promise<void> => {
  const end = performance.now() + ms;
  await Promise.all(
    agents.map(async (agent, i) => {
      while (performance.now() < end) {
        await sendNext(clients[i]!, agent, 'Bearer sk-profile-alloc');
        answers++;
      }
    }),
  );
};

await drive(10_000);
const inspector = new Session();
inspector.connect();
await inspector.post('HeapProfiler.startSampling', {
  samplingInterval: 16_384,
  includeObjectsCollectedByMajorGC: true,
  includeObjectsCollectedByMinorGC: !promoted,
});
const before = answers;
await drive(seconds * 1000);
const { profile } = (await inspector.post('HeapProfiler.stopSampling')) as { profile: { head: HeapNode } };
const timed = answers - before;
await Promise.all(clients.map((c) => c.close()));
await proxy.close();
upstream.close();
rmSync(dir, { recursive: true, force: true });

const label = (f: HeapNode['callFrame']): string =>
  `${f.functionName || '(anonymous)'}  ${f.url.replace(/^file:\/\//, '').replace(process.cwd() + '/', '')}:${f.lineNumber + 1}`;
const self = new Map<string, number>();
const inclusive = new Map<string, number>();
let total = 0;
const walk = (node: HeapNode, stack: readonly string[]): void => {
  const here = label(node.callFrame);
  const caller = stack.at(-1);
  const key = node.callFrame.url === '' && caller !== undefined ? `${here} ← ${caller}` : here;
  self.set(key, (self.get(key) ?? 0) + node.selfSize);
  total += node.selfSize;
  const path = [...stack, here];
  // Each function once per sample, however deep it recurses.
  for (const f of new Set(path.filter((l) => /adapters\/|src\/|operators\/|node_modules\//.test(l))))
    inclusive.set(f, (inclusive.get(f) ?? 0) + node.selfSize);
  for (const child of node.children) walk(child, path);
};
walk(profile.head, []);
const perAnswer = (bytes: number): string => `${(bytes / timed / 1024).toFixed(0).padStart(6)} KiB/answer`;
const top = (m: Map<string, number>, k: number): void => {
  for (const [key, bytes] of [...m].sort((a, b) => b[1] - a[1]).slice(0, k))
    console.log(`  ${perAnswer(bytes)}  ${key}`);
};
console.log(
  `${timed} answers in ${seconds} s (${clientCount} clients); ${promoted ? 'allocated and promoted' : 'allocated'} ${perAnswer(total)}`,
);
console.log('top functions by their own allocations:');
top(self, 30);
console.log('top functions by inclusive allocations (our code and its dependencies):');
top(inclusive, 40);
