/**
 * `npx tsx bench/_profile-replay.ts [sessions.jsonl] [--limit n] [--mode m]`: replays recorded
 * sessions through createTerminator under the CPU profiler and prints the top functions by self
 * time and by file (the replay bench's timed work plus replay's own figures; read the split).
 */
import { rmSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTiktokenCounter } from '../src/measure/index.js';
import { replaySessions } from '../src/replay/index.js';
import { replayScript } from './_support.js';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

const counter = createTiktokenCounter('o200k_base', { engine: 'js' });
const { sessions, tt, dir } = await replayScript(process.argv.slice(2), 'profile-replay', counter);
const session = new Session();
session.connect();
await session.post('Profiler.enable');
await session.post('Profiler.setSamplingInterval', { interval: 200 });
await session.post('Profiler.start');
const figuresCounter = createTiktokenCounter('o200k_base', { engine: 'wasm' });
const figures = await replaySessions(sessions, { terminator: tt, counter: figuresCounter, ledger: false });
const { profile } = (await session.post('Profiler.stop')) as {
  profile: { nodes: Node[]; samples: number[]; timeDeltas: number[] };
};
await tt.close();
counter.dispose?.();
figuresCounter.dispose?.();
rmSync(dir, { recursive: true, force: true });
const out = join(tmpdir(), 'replay.cpuprofile');
writeFileSync(out, JSON.stringify(profile));

const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const self = new Map<number, number>();
profile.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
const total = [...self.values()].reduce((a, b) => a + b, 0);
const where = (id: number): string =>
  byId
    .get(id)!
    .callFrame.url.replace(/^.*\/wt-[^/]+\//, '')
    .replace(/^file:\/\//, '') || '(native)';
const label = (id: number): string =>
  `${byId.get(id)!.callFrame.functionName || '(anonymous)'}  ${where(id)}:${byId.get(id)!.callFrame.lineNumber + 1}`;
const fn = new Map<string, number>();
const file = new Map<string, number>();
for (const [id, us] of self) {
  const up = parent.get(id);
  const key = where(id) === '(native)' && up !== undefined ? `${label(id)} ← ${label(up)}` : label(id);
  fn.set(key, (fn.get(key) ?? 0) + us);
  file.set(where(id), (file.get(where(id)) ?? 0) + us);
}
const top = (m: Map<string, number>, k: number): void => {
  for (const [key, us] of [...m].sort((a, b) => b[1] - a[1]).slice(0, k))
    console.log(`  ${((us / total) * 100).toFixed(1).padStart(5)} %  ${(us / 1000).toFixed(0).padStart(6)} ms  ${key}`);
};
console.log(
  `${figures.requests} requests, p50 ${figures.p50_ms.toFixed(2)} ms, p95 ${figures.p95_ms.toFixed(2)} ms; profile ${out}`,
);
console.log('top functions by self time:');
top(fn, 30);
console.log('by file:');
top(file, 20);
// Inclusive time by the nearest project frame of each sample (async continuations start at the
// microtask queue, so this names the function a sample ran in, not the stage that awaited it).
const incl = new Map<string, number>();
for (const [id, us] of self) {
  let at: number | undefined = id;
  let key = '(other)';
  while (at !== undefined) {
    const w = where(at);
    if (/^(src|operators)\//.test(w)) key = w;
    at = parent.get(at);
  }
  incl.set(key, (incl.get(key) ?? 0) + us);
}
console.log('by outermost project file on the stack:');
top(incl, 20);
