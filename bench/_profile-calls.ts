/**
 * `npx tsx bench/_profile-calls.ts [--format chat|anthropic] [--repeat 3] [--turns 200] [--stub put,deliver,get]`:
 * where a parallel-call request's time goes, beside its single-call twin's (the fixture of `bench
 * compile --parallel-only`, the host reusing its message objects). Sessions of 3 calls per
 * assistant message and of 1 take turns; per request it takes the wall time and the process's CPU
 * time (less disturbed by other processes than wall time), the CPU time of each request stage (up to
 * its emission), and the CPU time spent in each vault method and in the token counter. Prints the p50
 * of each and the parallel / single ratios.
 *
 * `--stub` takes vault work out, to weigh it: `put` stores nothing (the content-addressed id, as the
 * vault would give it), `deliver` finds every id delivered, `get` finds no mirrored rendering (stub
 * `put` with `deliver`: a delivery would find the unstored artifacts gone).
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Subject, tap } from 'rxjs';
import { compileRequest } from '../operators/compile-request.js';
import { collapseDuplicates } from '../operators/collapse-duplicates.js';
import { routeSkills } from '../operators/route-skills.js';
import { createItemMeasures } from '../src/ledger/item-measures.js';
import { codePoints, createTiktokenCounter } from '../src/measure/index.js';
import { Recognitions } from '../src/model/prefix.js';
import { createStep, type ProviderRequest, type Step } from '../src/step.js';
import { shortIdForSha } from '../src/vault/identity.js';
import { createVault } from '../src/vault/index.js';
import { callsSession, type CallsSession, type SessionFormat } from './parallel-session.js';

const argv = process.argv.slice(2);
const arg = (name: string, d: string): string => (argv.includes(name) ? argv[argv.indexOf(name) + 1]! : d);
const format = arg('--format', 'chat') as SessionFormat;
const repeat = Number(arg('--repeat', '3'));
const turns = Number(arg('--turns', '200'));
const stubs = new Set(arg('--stub', '').split(','));

const cpuMs = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
const median = (v: readonly number[]): number => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)] ?? 0;

/** Per request: figure name → ms (wall, cpu, stage:…, vault:…, counter). */
type Row = Map<string, number>;

/** One session through the request chain; a row per request. */
async function run(fixture: CallsSession): Promise<Row[]> {
  const dir = mkdtempSync(join(tmpdir(), 'tt-profile-calls-'));
  const vault = await createVault({ path: join(dir, 'vault.sqlite3') });
  const counter = createTiktokenCounter('o200k_base');
  let row: Row = new Map();
  const add = (key: string, ms: number): void => void row.set(key, (row.get(key) ?? 0) + ms);
  const timed = <A extends unknown[], R>(key: string, f: (...a: A) => R) =>
    function (this: unknown, ...a: A): R {
      const c0 = cpuMs();
      const out = f.apply(this, a);
      if (!(out instanceof Promise)) return (add(key, cpuMs() - c0), out);
      return out.finally(() => add(key, cpuMs() - c0)) as R;
    };
  const v = vault as unknown as Record<string, unknown>;
  if (stubs.has('put'))
    v['put'] = async (input: { content: string; digest?: string }) => {
      const sha = input.digest ?? createHash('sha256').update(input.content).digest('hex');
      const chars = codePoints(input.content);
      return {
        artifactId: shortIdForSha(sha),
        sha256: sha,
        created: true,
        chars,
        bytes: Buffer.byteLength(input.content),
      };
    };
  if (stubs.has('deliver')) v['deliver'] = async () => ({ epoch: 'stub', missing: [] });
  if (stubs.has('get')) v['getRendering'] = async () => undefined;
  for (const [k, f] of Object.entries(v))
    if (typeof f === 'function') v[k] = timed(`vault:${k}`, (f as (...a: unknown[]) => unknown).bind(vault));
  counter.count = timed('counter', counter.count.bind(counter));
  const recognitions = new Recognitions();
  const measures = createItemMeasures({ counter, recognitions });
  const input = new Subject<Step<ProviderRequest>>();
  let lap = 0;
  const stage = (name: string) => tap<Step<ProviderRequest>>(() => add(`stage:${name}`, -lap + (lap = cpuMs())));
  let emitted = 0;
  const sub = input
    .pipe(
      collapseDuplicates({ vault, counter, measures, recognitions }),
      stage('collapseDuplicates'),
      routeSkills({ counter }),
      stage('routeSkills'),
      compileRequest({ vault, counter, measures, recognitions }),
      stage('compileRequest'),
    )
    .subscribe(() => emitted++);
  const rows: Row[] = [];
  try {
    for (const [t, n] of fixture.ends.entries()) {
      row = new Map();
      const before = emitted;
      const [w0, c0] = [performance.now(), (lap = cpuMs())];
      const request = { ...fixture.top, messages: fixture.messages.slice(0, n) } as ProviderRequest;
      input.next(createStep(request, { sessionId: 'calls', requestId: `r${t}` }));
      while (emitted === before) await new Promise((r) => setImmediate(r));
      row.set('wall', performance.now() - w0).set('cpu', cpuMs() - c0);
      rows.push(row);
    }
    return rows;
  } finally {
    sub.unsubscribe();
    counter.dispose?.();
    await vault.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

for (const calls of [1, 3]) await run(callsSession({ turns: 30, calls, format, run: ' (warm-up)' }));
const rows: Record<1 | 3, Row[]> = { 1: [], 3: [] };
let runs = 0;
for (let k = 0; k < repeat; k++)
  for (const calls of [1, 3] as const)
    rows[calls].push(...(await run(callsSession({ turns, calls, format, run: ` (calls ${++runs})` }))));
const keys = [...new Set([...rows[1], ...rows[3]].flatMap((r) => [...r.keys()]))].sort();
console.log(
  `${format}, reused objects, ${repeat} × ${turns}-request sessions each${stubs.size > 1 ? `, stubbed: ${[...stubs].join(' ')}` : ''}`,
);
console.log('figure (ms per request)        p50: 1 call  3 calls  ratio   mean: 1 call  3 calls');
for (const key of keys) {
  const of = (c: 1 | 3): number[] => rows[c].map((r) => r.get(key) ?? 0);
  const mean = (v: number[]): number => v.reduce((a, b) => a + b, 0) / v.length;
  const [a, b] = [median(of(1)), median(of(3))];
  console.log(
    `  ${key.padEnd(28)} ${a.toFixed(2).padStart(10)} ${b.toFixed(2).padStart(8)} ${(a > 0 ? b / a : 0).toFixed(2).padStart(6)} ${mean(of(1)).toFixed(2).padStart(13)} ${mean(of(3)).toFixed(2).padStart(8)}`,
  );
}
