/**
 * `npx tsx bench/_profile-compile.ts [--from 150] [--turns 200] [--reuse | --gateway] [--calls N]`: the
 * compile bench's session (rebuilt message objects unless --reuse; --gateway: each body's bytes, built
 * untimed, parsed by the gateway's body memo within the timing as `bench compile` times it),
 * CPU-profiled over turns from..turns only, and the top functions by self time (and by file)
 * printed. --heap: sample allocations instead (V8's sampling heap profiler, garbage included), and
 * print the bytes allocated per request by function, self and inclusive. --calls N: the parallel-call bench's chat session instead (N calls per assistant
 * message, results shuffled when N > 1), to set its profile beside its single-call twin's (N = 1).
 * Writes the .cpuprofile to the temp dir.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Subject } from 'rxjs';
import { BodyMemo } from '../adapters/proxy/body.js';
import { createTiktokenCounter } from '../src/measure/index.js';
import { createStep, type ProviderRequest, type Step } from '../src/step.js';
import { createVault } from '../src/vault/index.js';
import { requestChain, transcript } from './compile.js';
import { callsSession } from './parallel-session.js';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

const argv = process.argv.slice(2);
const num = (name: string, d: number): number => (argv.includes(name) ? Number(argv[argv.indexOf(name) + 1]) : d);
const from = num('--from', 150);
const turns = num('--turns', 200);
const gateway = argv.includes('--gateway');
const heap = argv.includes('--heap');
const fresh = !argv.includes('--reuse') && !gateway;
const calls = argv.includes('--calls') ? callsSession({ turns, calls: num('--calls', 1) }) : undefined;
/** Messages request `t` (1-based) holds. */
const end = (t: number): number => (calls ? calls.ends[t - 1]! : 2 + 2 * t);

const dir = mkdtempSync(join(tmpdir(), 'tt-profile-compile-'));
const vault = await createVault({ path: join(dir, 'vault.sqlite3') });
const counter = createTiktokenCounter('o200k_base');
const input = new Subject<Step<ProviderRequest>>();
// Only a count of the outputs is kept: a host does not hold every request it sent (holding them
// all ran a 1,500-turn profile out of heap).
let emitted = 0;
const sub = input.pipe(requestChain(vault, counter)).subscribe(() => emitted++);
const messages = calls ? calls.messages : transcript(turns);
const session = new Session();
session.connect();
if (!heap) {
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 200 });
}
let wall = 0;
// The host's own rebuilding (JSON round trip) happens before profiling starts.
const build = (t: number): ProviderRequest => {
  const upTo = messages.slice(0, end(t));
  return { model: 'gpt-4o', messages: fresh ? (JSON.parse(JSON.stringify(upTo)) as unknown[]) : upTo };
};
const prebuilt = new Map<number, ProviderRequest>();
const texts = gateway ? messages.map((m) => JSON.stringify(m)) : [];
const bodies = gateway ? new BodyMemo() : undefined;
/** The body's bytes, then the body memo's parse of them (the request as the gateway hands it on). */
const bodyBytes = (t: number): Buffer =>
  Buffer.from(`{"model":"gpt-4o","messages":[${texts.slice(0, end(t)).join(',')}]}`);
const viaGateway = (body: Buffer): ProviderRequest =>
  bodies!.parse(body, 'messages', 'profile', () => 'gateway')!.value as unknown as ProviderRequest;
for (let t = 1; t <= turns; t++) {
  if (t === from) {
    // Rebuilt requests are built before profiling; 100 bodies of a long session would not fit.
    if (!gateway) for (let k = from; k <= turns; k++) prebuilt.set(k, build(k));
    await (heap
      ? session.post('HeapProfiler.startSampling', {
          samplingInterval: 1024,
          includeObjectsCollectedByMajorGC: true,
          includeObjectsCollectedByMinorGC: true,
        })
      : session.post('Profiler.start'));
  }
  const body = gateway ? bodyBytes(t) : undefined;
  const t0 = performance.now();
  const request = body !== undefined ? viaGateway(body) : (prebuilt.get(t) ?? build(t));
  prebuilt.delete(t);
  const n = emitted;
  input.next(createStep(request, { sessionId: 'profile', requestId: `r${t}` }));
  while (emitted === n) await new Promise((r) => setImmediate(r));
  if (t >= from) wall += performance.now() - t0;
}
if (heap) {
  await allocations();
  process.exit(0);
}
const { profile } = (await session.post('Profiler.stop')) as {
  profile: { nodes: Node[]; samples: number[]; timeDeltas: number[] };
};
sub.unsubscribe();
counter.dispose?.();
await vault.close();
const mode = fresh ? '-fresh' : gateway ? '-gateway' : '';
const out = join(
  tmpdir(),
  `compile-turns-${from}-${turns}${mode}${calls ? `-calls${num('--calls', 1)}` : ''}.cpuprofile`,
);
writeFileSync(out, JSON.stringify(profile));
rmSync(dir, { recursive: true, force: true });

const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const self = new Map<number, number>();
profile.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
const total = [...self.values()].reduce((a, b) => a + b, 0);
const fn = new Map<string, number>();
const file = new Map<string, number>();
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const label = (id: number): string => {
  const f = byId.get(id)!.callFrame;
  const where = f.url.replace(/^.*\/wt-[^/]+\//, '').replace(/^file:\/\//, '') || '(native)';
  return `${f.functionName || '(anonymous)'}  ${where}:${f.lineNumber + 1}`;
};
for (const [id, us] of self) {
  const f = byId.get(id)!.callFrame;
  const where = f.url.replace(/^.*\/wt-[^/]+\//, '').replace(/^file:\/\//, '') || '(native)';
  // Native frames say little alone: name their JS caller.
  const up = parent.get(id);
  const key = where === '(native)' && up !== undefined ? `${label(id)} ← ${label(up)}` : label(id);
  fn.set(key, (fn.get(key) ?? 0) + us);
  file.set(where, (file.get(where) ?? 0) + us);
}
const top = (m: Map<string, number>, k: number): void => {
  for (const [key, us] of [...m].sort((a, b) => b[1] - a[1]).slice(0, k))
    console.log(`  ${((us / total) * 100).toFixed(1).padStart(5)} %  ${(us / 1000).toFixed(0).padStart(6)} ms  ${key}`);
};
console.log(
  `turns ${from}–${turns}, ${fresh ? 'rebuilt' : gateway ? 'body memo' : 'reused'} message objects: ${(wall / (turns - from + 1)).toFixed(1)} ms per request; profile ${out}`,
);
console.log('top functions by self time:');
top(fn, 25);
console.log('by file:');
top(file, 15);

interface HeapNode {
  callFrame: { functionName: string; url: string };
  selfSize: number;
  children: HeapNode[];
}

/** --heap: stop sampling, print bytes per request by function (self: native callees named with their caller). */
async function allocations(): Promise<void> {
  const { profile } = (await session.post('HeapProfiler.stopSampling')) as { profile: { head: HeapNode } };
  sub.unsubscribe();
  await vault.close();
  rmSync(dir, { recursive: true, force: true });
  const [self, inclusive] = [new Map<string, number>(), new Map<string, number>()];
  const name = (n: HeapNode): string =>
    `${n.callFrame.functionName || '(anonymous)'}  ${n.callFrame.url.replace(/^.*\/(src|operators|adapters|node_modules)\//, '$1/')}`;
  const walk = (n: HeapNode, callers: readonly string[]): number => {
    const own = name(n);
    const key = n.callFrame.url === '' && callers.length > 0 ? `${own} ← ${callers.at(-1)}` : own;
    self.set(key, (self.get(key) ?? 0) + n.selfSize);
    let sum = n.selfSize;
    for (const c of n.children) sum += walk(c, [...callers, own]);
    if (!callers.includes(own)) inclusive.set(own, (inclusive.get(own) ?? 0) + sum);
    return sum;
  };
  const requests = turns - from + 1;
  const total = walk(profile.head, []);
  console.log(`turns ${from}–${turns}: ${(total / requests / 1e6).toFixed(2)} MB allocated per request`);
  for (const [title, m] of [
    ['self', self],
    ['inclusive', inclusive],
  ] as const) {
    console.log(`${title}, kB per request:`);
    for (const [key, bytes] of [...m].sort((a, b) => b[1] - a[1]).slice(0, 30))
      console.log(`  ${(bytes / requests / 1e3).toFixed(0).padStart(6)}  ${key}`);
  }
}
