/**
 * `npx tsx bench/_count-replay.ts [sessions.jsonl] [--limit n] [--mode m]`: replays recorded
 * sessions through createTerminator and counts, per request (inside `reduceRequest`, telemetry
 * included), the whole-value serializations (canonicalJson compact / spaced, serializedChars walks)
 * and the tokenizations: the counter's `count()` calls and its piece-recording calls (counters
 * count directly, so each call tokenizes; what the stages, the cap and telemetry each counted again
 * shows here). Counts are not timings: they are the same on every machine.
 */
import { rmSync } from 'node:fs';
import { serializationStats } from '../src/measure/canonical-json.js';
import { createTiktokenCounter } from '../src/measure/index.js';
import type { RecordingCounter, TokenCounter } from '../src/measure/types.js';
import { replaySessions } from '../src/replay/index.js';
import type { Terminator } from '../src/runtime/index.js';
import { replayScript } from './_support.js';

const argv = process.argv.slice(2);
const builtIn = createTiktokenCounter('o200k_base', { engine: 'js' });
let counted = 0;
let recorded = 0;
// The built-in counter as the stages see it (its pieces and countsKey kept), every call logged.
const byPiece = builtIn.pieces;
const pieces: RecordingCounter | undefined =
  byPiece === undefined
    ? undefined
    : {
        countRecorded: (text, key) => (recorded++, byPiece.countRecorded(text, key)),
        countDerived: (target, source, runs, key) => (recorded++, byPiece.countDerived(target, source, runs, key)),
      };
const counter: TokenCounter = {
  ...builtIn,
  count: (text, key) => (counted++, builtIn.count(text, key)),
  ...(pieces === undefined ? {} : { pieces }),
};
const { sessions, tt, dir } = await replayScript(argv, 'count-replay', counter);
type Counts = { compact: number; spaced: number; primitive: number; sized: number; counted: number; recorded: number };
const snapshot = (): Counts => {
  const s = serializationStats();
  return {
    compact: s.compact,
    spaced: s.spaced,
    primitive: s.primitive,
    sized: s.sized,
    counted,
    recorded,
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
    counted: b.counted - a.counted,
    recorded: b.recorded - a.recorded,
  });
  return out;
};
const figuresCounter = createTiktokenCounter('o200k_base', { engine: 'wasm' });
const figures = await replaySessions(sessions, {
  terminator: { ...tt, reduceRequest },
  counter: figuresCounter,
  ledger: false,
});
await tt.close();
builtIn.dispose?.();
figuresCounter.dispose?.();
rmSync(dir, { recursive: true, force: true });

const keys = ['compact', 'spaced', 'primitive', 'sized', 'counted', 'recorded'] as const;
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
    counted: 'count() calls (each tokenizes)',
    recorded: 'piece-recording counts',
  }[k];
  console.log(
    `  ${label.padEnd(34)} ${String(total).padStart(10)} ${(total / Math.max(1, xs.length)).toFixed(1).padStart(8)} ${String(quantile(xs, 0.5)).padStart(6)} ${String(quantile(xs, 0.95)).padStart(6)}`,
  );
}
