/**
 * `npx tsx bench/_gc-probe.ts [--turns 1500] [--host rebuild|churn|reuse]`: `bench compile`'s long
 * session through the same request stages, in a plain loop (no warm-up, no other sessions in the
 * process, no full GC before it, nothing held between requests), as a host that has only this one
 * session runs it. Prints the p50 per request around turn 50 and the last turn and the GC pauses
 * that fell inside those requests, then V8's young-generation size at the end.
 *
 * Why it exists: in `bench compile` the rebuilding host's parsed copy is collected between requests
 * and its long-session p50 has no GC in it; in this plain loop those collections land inside our
 * requests (docs/cache-policy.md, "Per-request cost"). Run it with
 * `NODE_OPTIONS=--max-semi-space-size=64` to see the host's own setting decide it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PerformanceObserver } from 'node:perf_hooks';
import { getHeapSpaceStatistics } from 'node:v8';
import { Subject } from 'rxjs';
import { createTiktokenCounter } from '../src/measure/index.js';
import { createStep, type ProviderRequest, type Step } from '../src/step.js';
import { createVault } from '../src/vault/index.js';
import { requestChain, transcript } from './compile.js';

const HOSTS = ['rebuild', 'churn', 'reuse'] as const;
const argv = process.argv.slice(2);
const arg = (name: string, d: string): string => (argv.includes(name) ? (argv[argv.indexOf(name) + 1] ?? d) : d);
const turns = Number(arg('--turns', '1500'));
const host = arg('--host', 'rebuild') as (typeof HOSTS)[number];
if (!Number.isInteger(turns) || turns < 100)
  throw new Error(`--turns must be an integer ≥ 100, got ${arg('--turns', '')}`);
if (!HOSTS.includes(host)) throw new Error(`--host must be one of ${HOSTS.join(', ')}, got ${host}`);

const dir = mkdtempSync(join(tmpdir(), 'tt-gc-probe-'));
const vault = await createVault({ path: join(dir, 'vault.sqlite3') });
const counter = createTiktokenCounter('o200k_base');
const input = new Subject<Step<ProviderRequest>>();
let emitted = 0;
const sub = input.pipe(requestChain(vault, counter)).subscribe(() => emitted++);
const messages = transcript(turns);
const texts = messages.map((m) => JSON.stringify(m));
const pauses: { start: number; ms: number }[] = [];
const observer = new PerformanceObserver((list) => {
  for (const e of list.getEntries()) pauses.push({ start: e.startTime, ms: e.duration });
});
observer.observe({ entryTypes: ['gc'] });
const windows: [number, number][] = [];
for (let t = 1; t <= turns; t++) {
  const n = 2 + 2 * t;
  // Built before the timing, as bench compile builds it: `churn` parses the copy and leaves it unread.
  const parsed = host === 'reuse' ? undefined : (JSON.parse(`[${texts.slice(0, n).join(',')}]`) as unknown[]);
  const request = { model: 'gpt-4o', messages: host === 'rebuild' ? parsed! : messages.slice(0, n) };
  const before = emitted;
  const w0 = performance.now();
  input.next(createStep(request, { sessionId: 'probe', requestId: `r${t}` }));
  while (emitted === before) await new Promise((r) => setImmediate(r));
  windows.push([w0, performance.now()]);
  void parsed;
}
await new Promise((r) => setImmediate(r)); // the last GC entries
observer.disconnect();
const p50 = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
for (const [a, b] of [
  [26, 75],
  [turns - 49, turns],
] as const) {
  const spans = windows.slice(a - 1, b);
  const inside = spans.map(([x, y]) => pauses.reduce((s, p) => s + (p.start >= x && p.start < y ? p.ms : 0), 0));
  const count = pauses.filter((p) => spans.some(([x, y]) => p.start >= x && p.start < y)).length;
  console.log(
    `${host}, turns ${a}–${b}: p50 ${p50(spans.map(([x, y]) => y - x)).toFixed(2)} ms per request; GC inside them: ${count} pauses, ${inside.reduce((s, x) => s + x, 0).toFixed(0)} ms in all, p50 ${p50(inside).toFixed(2)} ms per request`,
  );
}
const young = getHeapSpaceStatistics().find((s) => s.space_name === 'new_space');
console.log(`young generation at the end: ${((young?.space_size ?? 0) / 1e6).toFixed(1)} MB`);
sub.unsubscribe();
counter.dispose?.();
await vault.close();
rmSync(dir, { recursive: true, force: true });
