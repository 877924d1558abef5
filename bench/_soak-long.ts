/**
 * The soak's long-session check (bench/soak.ts), run with --expose-gc: one session of `turns`
 * turns through `createTerminator` on a bounded vault (retention active), every turn a tool result
 * through the tool stream and the request as the host would send it. The host keeps the
 * instruction prefix and a sliding window of its most recent turns (as an agent does once its
 * context window is full), so the heap measures the library, not the host's transcript. Prints
 * the JS heap after GC at the end of the warm-up (turn 100) and at the end, as JSON.
 *
 * Usage: _soak-long.ts <dir> <turns> <capacityBytes> <windowTurns>
 */
import { join } from 'node:path';
import { clearEncoderCaches } from '../src/measure/encoders.js';
import { createTerminator } from '../src/runtime/index.js';
import type { ProviderRequest } from '../src/step.js';

const [dir = '', turnsArg = '1500', capacityArg = '16000000', windowArg = '40'] = process.argv.slice(2);
const turns = Number(turnsArg);
const windowTurns = Number(windowArg);
const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run with --expose-gc');
/**
 * JS heap after GC. The tokenizer's merge cache (the JS engine's, at most 20,000 pieces, several
 * MB once full) is bounded and filled by any text counted, not by this session: it is emptied
 * first, and its share is reported apart.
 */
const heap = (): { total: number; caches: number } => {
  for (let i = 0; i < 4; i++) gc();
  const before = process.memoryUsage().heapUsed;
  clearEncoderCaches();
  for (let i = 0; i < 4; i++) gc();
  const after = process.memoryUsage().heapUsed;
  return { total: after, caches: before - after };
};

const output = (t: number): string => {
  const lines = t % 9 === 4 ? 420 : 12 + ((t * 7) % 30);
  return Array.from(
    { length: lines },
    (_, i) => `src/pkg_${t % 17}/mod_${t % 11}.ts:${i + 1}: export const v${i} = run(${t}, ${i}); // t${t}`,
  ).join('\n');
};

const tt = await createTerminator({
  env: {},
  overrides: { dbPath: join(dir, 'long.sqlite3'), vaultMaxBytes: Number(capacityArg) },
  ledger: false,
});
const prefix: Record<string, unknown>[] = [
  { role: 'system', content: 'You are a careful coding agent. Use the tools; keep answers short.' },
  { role: 'user', content: 'Task: make the failing build pass and explain the cause.' },
];
const recent: Record<string, unknown>[][] = [];
const warm = Math.min(100, Math.floor(turns / 2));
let warmHeap = 0;
let warmCaches = 0;
const marks: { turn: number; heap: number; caches: number }[] = [];
const t0 = Date.now();
for (let t = 0; t < turns; t++) {
  const callId = `call_${t}`;
  const args = { path: `src/pkg_${t % 17}/mod_${t % 11}.ts` };
  const assistant = {
    role: 'assistant',
    content: `Turn ${t}: reading the module.`,
    tool_calls: [{ id: callId, type: 'function', function: { name: 'read_file', arguments: JSON.stringify(args) } }],
  };
  const reduced = await tt.reduceToolResult(
    { callId, name: 'read_file', args, content: output(t) },
    { sessionId: 'long' },
  );
  recent.push([assistant, { role: 'tool', tool_call_id: callId, content: reduced.value.content }]);
  if (recent.length > windowTurns) recent.shift();
  const request: ProviderRequest = {
    model: 'gpt-4o',
    messages: JSON.parse(JSON.stringify([...prefix, ...recent.flat()])) as unknown[],
  };
  await tt.reduceRequest(request, { sessionId: 'long', requestId: `long#${t}` });
  if (t + 1 === warm) ({ total: warmHeap, caches: warmCaches } = heap());
  if ((t + 1) % 250 === 0 && t + 1 < turns) {
    const h = heap();
    marks.push({ turn: t + 1, heap: h.total, caches: h.caches });
  }
}
const { total: endHeap, caches: endCaches } = heap();
const usage = await tt.vault.usage();
await tt.close();
process.stdout.write(
  `${JSON.stringify({ turns, warm, warmHeap, endHeap, ratio: endHeap / warmHeap, warmCaches, endCaches, marks, seconds: (Date.now() - t0) / 1000, vaultBytes: usage.bytes, pruned: usage.prunedArtifacts })}\n`,
);
