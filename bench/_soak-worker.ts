/**
 * One process of the soak (bench/soak.ts): its own Terminator on the shared, bounded SQLite
 * vault, running `lanes` sessions at a time until the deadline. Each session is the reliability
 * workload under a new id and variant (outputs shared between some variants, so sessions share
 * artifacts), plus one large output of its own through the tool stream (about 200 kB, delivered
 * and pinned) and unpinned filler puts (retention pressure); when it ends, every receipt that
 * reached an output is recovered through the recovery
 * tool in that session (still live: a receipt that does not recover is a lost receipt), then the
 * session is ended (endSession) — except every fifth, which is abandoned and must age out with the
 * session TTL. Last stdout line: a JSON report.
 *
 * Usage: _soak-worker.ts <vault> <worker> <seconds> <capacityBytes> <ttlSeconds> <warmupSeconds> <lanes>
 */
import { createTerminator } from '../src/runtime/index.js';
import { buildWorkload } from '../test/fixtures/reliability/workload.js';
import { checkResults, decisionsOf, recoverViaTool, RTK_STUB, runWorkload } from '../test/reliability/harness.js';

const [
  path = '',
  workerArg = '0',
  secondsArg = '60',
  capacityArg = '16000000',
  ttlArg = '60',
  warmArg = '60',
  lanesArg = '3',
] = process.argv.slice(2);
const worker = Number(workerArg);
const started = Date.now();
const until = started + Number(secondsArg) * 1000;
const warmUntil = started + Number(warmArg) * 1000;

const tt = await createTerminator({
  env: {},
  overrides: {
    dbPath: path,
    rtkPath: RTK_STUB,
    timeoutMs: 10_000, // rtk's own timeout is not under test: the stub needs time on a loaded machine
    vaultMaxBytes: Number(capacityArg),
    sessionTtlSeconds: Number(ttlArg),
    contextBlockTurns: 0,
    minArtifactChars: 8000,
  },
  ledger: false,
  vaultErrors: 'throw',
});

const report = {
  worker,
  sessions: 0,
  abandoned: 0,
  calls: 0,
  receipts: 0,
  lost: 0,
  capacityDuringWarmup: 0,
  capacityAfterWarmup: 0,
  failedOpen: {} as Record<string, number>,
  problems: [] as string[],
};
let next = 0;

async function lane(): Promise<void> {
  while (Date.now() < until) {
    const n = next++;
    const id = `w${worker}-s${n}`;
    const w = buildWorkload({ id, variant: worker * 100_000 + n, fillerTurns: 4 });
    const results = await runWorkload(tt, w);
    // A large output of the session's own (unique content) and filler nobody is delivered.
    const lines = Array.from(
      { length: 2500 },
      (_, i) => `src/w${worker}/s${n}/file_${i}.ts:${i + 1}: const w${worker}_s${n}_${i} = lookup(${i}); // match`,
    );
    const big = { callId: `big-${n}`, name: 'search_files', args: { pattern: 'lookup' }, content: lines.join('\n') };
    results.push({ kind: 'tool_result', input: big, output: await tt.reduceToolResult(big, { sessionId: id }) });
    for (let f = 0; f < 10; f++) {
      const text = `filler w${worker} s${n} ${f} `;
      await tt.vault
        .put({ content: text.repeat(Math.ceil(20_000 / text.length)), toolName: 'filler' })
        .catch(() => undefined);
    }
    const after = Date.now() >= warmUntil;
    for (const d of decisionsOf(results)) {
      if (d.kind !== 'failed_open') continue;
      const label = `${d.stage}:${d.error ?? '?'}`;
      report.failedOpen[label] = (report.failedOpen[label] ?? 0) + 1;
      if ((d.error ?? '').includes('E_VAULT_CAPACITY')) {
        if (after) report.capacityAfterWarmup++;
        else report.capacityDuringWarmup++;
      }
    }
    const check = await checkResults(results, (rid) => recoverViaTool(tt.recoveryTool, id, rid));
    report.sessions++;
    report.calls += results.length;
    report.receipts += check.receipts.length;
    report.lost += check.receipts.length - check.recovered;
    for (const p of check.problems) if (report.problems.length < 20) report.problems.push(`${id}: ${p}`);
    if (n % 5 === 4) report.abandoned++;
    else await tt.endSession({ sessionId: id });
  }
}

await Promise.all(Array.from({ length: Number(lanesArg) }, () => lane()));
await tt.close();
process.stdout.write(`${JSON.stringify(report)}\n`);
