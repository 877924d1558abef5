/**
 * `npx tsx bench/_count-replay.ts [sessions.jsonl] [--limit n] [--mode m]`: replays recorded
 * sessions through createTerminator and counts, per request (inside `reduceRequest`, telemetry
 * included), the whole-value serializations (canonicalJson compact / spaced, serializedChars walks)
 * and the token counting calls (`count()` calls into the process-wide memo, and its misses: the
 * strings actually tokenized; with `--host-counter`, a counter without that memo, every call).
 * Counts are not timings: they are the same on every machine.
 */
import { rmSync } from 'node:fs';
import { serializationStats } from '../src/measure/canonical-json.js';
import { clearSharedCountMemo, createTiktokenCounter, sharedCountMemoStats } from '../src/measure/index.js';
import type { TokenCounter } from '../src/measure/types.js';
import { replaySessions } from '../src/replay/index.js';
import type { Terminator } from '../src/runtime/index.js';
import { replayScript } from './_support.js';

const argv = process.argv.slice(2);
clearSharedCountMemo();
// `--host-counter`: a counter the host brings (no process-wide memo behind it), so every count()
// call is a tokenization: what the stages, the cap and telemetry each counted again shows here.
const hostCounter = argv.includes('--host-counter');
const builtIn = createTiktokenCounter('o200k_base', { engine: 'js', memo: !hostCounter });
let hostCalls = 0;
const counter: TokenCounter = hostCounter
  ? { name: 'host', exact: true, count: (text) => (hostCalls++, builtIn.count(text)) }
  : builtIn;
const { sessions, tt, dir } = await replayScript(argv, 'count-replay', counter);
type Counts = { compact: number; spaced: number; primitive: number; sized: number; calls: number; tokenized: number };
const snapshot = (): Counts => {
  const s = serializationStats();
  const m = sharedCountMemoStats();
  return {
    compact: s.compact,
    spaced: s.spaced,
    primitive: s.primitive,
    sized: s.sized,
    calls: hostCounter ? hostCalls : m.hits + m.misses,
    tokenized: hostCounter ? hostCalls : m.misses,
  };
};
const perRequest: Counts[] = [];
const reduceRequest: Terminator['reduceRequest'] = async (request, context, signal) => {
  const a = snapshot();
  const out = await tt.reduceRequest(request, context, signal);
  const b = snapshot();
  perRequest.push({
    compact: b.compact - a.compact,
    spaced: b.spaced - a.spaced,
    primitive: b.primitive - a.primitive,
    sized: b.sized - a.sized,
    calls: b.calls - a.calls,
    tokenized: b.tokenized - a.tokenized,
  });
  return out;
};
const figuresCounter = createTiktokenCounter('o200k_base', { engine: 'wasm', memo: false });
const figures = await replaySessions(sessions, {
  terminator: { ...tt, reduceRequest },
  counter: figuresCounter,
  ledger: false,
});
await tt.close();
builtIn.dispose?.();
figuresCounter.dispose?.();
rmSync(dir, { recursive: true, force: true });

const keys = ['compact', 'spaced', 'primitive', 'sized', 'calls', 'tokenized'] as const;
const quantile = (xs: number[], q: number): number => {
  const s = [...xs].sort((x, y) => x - y);
  return s.length === 0 ? 0 : s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};
const cpu = process.cpuUsage();
console.log(
  `process CPU time ${((cpu.user + cpu.system) / 1e6).toFixed(1)} s (replay harness included; less load-sensitive than the wall times)`,
);
console.log(
  `${figures.requests} requests (${sessions.length} sessions), p50 ${figures.p50_ms.toFixed(2)} ms, p95 ${figures.p95_ms.toFixed(2)} ms`,
);
console.log(
  `per request inside reduceRequest:   ${'total'.padStart(10)} ${'mean'.padStart(8)} ${'p50'.padStart(6)} ${'p95'.padStart(6)}`,
);
for (const k of keys) {
  const xs = perRequest.map((c) => c[k]);
  const total = xs.reduce((n, x) => n + x, 0);
  const label = {
    compact: 'canonicalJson compact (objects)',
    spaced: 'canonicalJson spaced (objects)',
    primitive: 'canonicalJson of a primitive',
    sized: 'serializedChars walks',
    calls: 'count() calls (memo lookups)',
    tokenized: 'strings tokenized (memo misses)',
  }[k];
  console.log(
    `  ${label.padEnd(34)} ${String(total).padStart(10)} ${(total / Math.max(1, xs.length)).toFixed(1).padStart(8)} ${String(quantile(xs, 0.5)).padStart(6)} ${String(quantile(xs, 0.95)).padStart(6)}`,
  );
}
