/**
 * `npx tsx bench/_profile-proxy.ts [--requests 300] [--mode off]`: where the proxy's time goes on requests whose
 * reduction is cached. One in-process proxy (SQLite vault in a temp dir) in front of a loopback
 * upstream; each of the sample session's 50–200 kB bodies is sent once to warm its session, then
 * `--requests` more are sent one at a time under the CPU profiler. Prints the per-request wall time
 * and the top functions by self and by inclusive time (and by file). Writes the .cpuprofile to the
 * temp dir.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';
import { createProxy } from '../adapters/proxy/index.js';
import { loadProxyConfig } from '../src/config/proxy.js';
import { sampleBodies, startChatUpstream } from './_support.js';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

const argv = process.argv.slice(2);
const requests = argv.includes('--requests') ? Number(argv[argv.indexOf('--requests') + 1]) : 300;
const mode = argv.includes('--mode') ? argv[argv.indexOf('--mode') + 1] : undefined;

const bodies = sampleBodies();
const { server: upstream, url: upstreamUrl } = await startChatUpstream();
const dir = mkdtempSync(join(tmpdir(), 'tt-profile-proxy-'));
const proxy = await createProxy({
  config: loadProxyConfig({
    env: {},
    flags: { port: 0, upstream: upstreamUrl },
  }),
  terminatorOptions: {
    env: { HOME: dir, ...(mode === undefined ? {} : { TOKEN_TERMINATOR_MODE: mode }) },
    overrides: { dbPath: join(dir, 'vault.sqlite3') },
  },
});
const pool = new Pool(await proxy.listen(), { connections: 1 });
const send = async (body: string): Promise<void> => {
  const res = await pool.request({
    path: '/v1/chat/completions',
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      authorization: 'Bearer sk-profile',
      'x-token-terminator-session': 'profile',
    },
    body,
  });
  await res.body.arrayBuffer();
};
for (const body of bodies) await send(body);
await proxy.settled();

const inspector = new Session();
inspector.connect();
await inspector.post('Profiler.enable');
await inspector.post('Profiler.setSamplingInterval', { interval: 100 });
await inspector.post('Profiler.start');
const t0 = performance.now();
for (let i = 0; i < requests; i++) await send(bodies[i % bodies.length]!);
const wall = performance.now() - t0;
await proxy.settled();
const { profile } = (await inspector.post('Profiler.stop')) as {
  profile: { nodes: Node[]; samples: number[]; timeDeltas: number[] };
};
await pool.close();
await proxy.close();
upstream.close();
const out = join(tmpdir(), 'proxy-cached.cpuprofile');
writeFileSync(out, JSON.stringify(profile));
rmSync(dir, { recursive: true, force: true });

const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const where = (id: number): string =>
  byId
    .get(id)!
    .callFrame.url.replace(/^.*\/wt-[^/]+\//, '')
    .replace(/^file:\/\//, '') || '(native)';
const label = (id: number): string => {
  const f = byId.get(id)!.callFrame;
  return `${f.functionName || '(anonymous)'}  ${where(id)}:${f.lineNumber + 1}`;
};
const self = new Map<string, number>();
const inclusive = new Map<string, number>();
const file = new Map<string, number>();
let total = 0;
profile.samples.forEach((id, i) => {
  const us = profile.timeDeltas[i] ?? 0;
  total += us;
  const up = parent.get(id);
  const key = where(id) === '(native)' && up !== undefined ? `${label(id)} ← ${label(up)}` : label(id);
  self.set(key, (self.get(key) ?? 0) + us);
  file.set(where(id), (file.get(where(id)) ?? 0) + us);
  const seen = new Set<string>();
  for (let n: number | undefined = id; n !== undefined; n = parent.get(n)) {
    const l = label(n);
    if (seen.has(l)) continue;
    seen.add(l);
    inclusive.set(l, (inclusive.get(l) ?? 0) + us);
  }
});
const top = (m: Map<string, number>, k: number): void => {
  for (const [key, us] of [...m].sort((a, b) => b[1] - a[1]).slice(0, k))
    console.log(
      `  ${((us / total) * 100).toFixed(1).padStart(5)} %  ${(us / 1000 / requests).toFixed(3).padStart(7)} ms/req  ${key}`,
    );
};
console.log(
  `${requests} cached requests (${bodies.length} bodies of ${Math.min(...bodies.map((b) => b.length))}–${Math.max(...bodies.map((b) => b.length))} bytes), one at a time: ${(wall / requests).toFixed(2)} ms per request (client, proxy and upstream in one process); profile ${out}`,
);
console.log('top functions by self time:');
top(self, 30);
console.log('top functions by inclusive time (our code):');
top(new Map([...inclusive].filter(([k]) => /adapters\/|src\/|operators\//.test(k))), 30);
console.log('by file:');
top(file, 15);
