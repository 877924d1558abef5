/**
 * `npm run bench -- compile`: a 200-turn synthetic agent session through the request chain
 * (collapseDuplicates → routeSkills → compileRequest, exact o200k_base gate, SQLite vault on a
 * temp file), one request per turn as a host sends them. Prints the time per request around
 * turn 20 and turn 200 and their ratio (incremental cost: the target is ≤ 2), next to a baseline
 * measured in the same run: what one whole-request serialization + tokenization costs at the same
 * turns (the reference's per-call work, which grows with history).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Subject } from 'rxjs';
import { compileRequest } from '../operators/compile-request.js';
import { collapseDuplicates } from '../operators/collapse-duplicates.js';
import { routeSkills } from '../operators/route-skills.js';
import { canonicalJson, createTiktokenCounter } from '../src/measure/index.js';
import { createStep, type ProviderRequest, type Step } from '../src/step.js';
import { createVault } from '../src/vault/index.js';

const TURNS = 200;

export function output(t: number): string {
  const lines = t % 7 === 3 ? 500 : 40 + (t % 5) * 10;
  return Array.from({ length: lines }, (_, i) => `src/module_${t % 13}/file_${i}.ts:${i + t}: const value_${i} = compute(${t}, ${i}); // turn ${t}`).join('\n');
}

/** The transcript a host keeps: the same message objects are reused request after request. */
export function transcript(): unknown[] {
  const messages: unknown[] = [{ role: 'system', content: 'You are a careful coding agent. Use the tools.' }, { role: 'user', content: 'Fix the failing build and explain the cause.' }];
  for (let t = 0; t < TURNS; t++) {
    messages.push({ role: 'assistant', content: `Step ${t}: looking at module ${t % 13}.`, tool_calls: [{ id: `call_${t}`, type: 'function', function: { name: t % 2 === 0 ? 'search_files' : 'read_file', arguments: `{"path":"src/module_${t % 13}"}` } }] });
    messages.push({ role: 'tool', tool_call_id: `call_${t}`, content: output(t) });
  }
  return messages;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function runSession(fresh: boolean): Promise<{ at20: number; at200: number; base20: number; base200: number; finalChars: number; rawChars: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'tt-bench-compile-'));
  const vault = await createVault({ path: join(dir, 'vault.sqlite3') });
  const counter = createTiktokenCounter('o200k_base');
  const input = new Subject<Step<ProviderRequest>>();
  const outputs: Step<ProviderRequest>[] = [];
  const sub = input.pipe(collapseDuplicates({ vault, counter }), routeSkills({ counter }), compileRequest({ vault, counter })).subscribe((s) => outputs.push(s));
  const messages = transcript();
  const times: number[] = [];
  const base: number[] = [];
  let last: Step<ProviderRequest> | undefined;
  try {
    for (let t = 1; t <= TURNS; t++) {
      const upTo = messages.slice(0, 2 + 2 * t);
      const request: ProviderRequest = { model: 'gpt-4o', messages: fresh ? (JSON.parse(JSON.stringify(upTo)) as unknown[]) : upTo };
      const n = outputs.length;
      const started = performance.now();
      const done = new Promise<void>((resolve) => {
        const poll = (): void => (outputs.length > n ? resolve() : void setImmediate(poll));
        poll();
      });
      input.next(createStep(request, { sessionId: fresh ? 'fresh' : 'shared', requestId: `r${t}` }));
      await done;
      times.push(performance.now() - started);
      last = outputs[n];
      if (t === 20 || t === TURNS) {
        const b0 = performance.now();
        for (let k = 0; k < 3; k++) counter.count(canonicalJson(request, { compact: true }));
        base[t === 20 ? 0 : 1] = (performance.now() - b0) / 3;
      }
    }
    // Ten requests per window: a median of five was dominated by background vault indexing and GC.
    const window = (t: number): number => median(times.slice(t - 10, t));
    return {
      at20: window(20),
      at200: window(TURNS),
      base20: base[0]!,
      base200: base[1]!,
      finalChars: canonicalJson(last!.value).length,
      rawChars: canonicalJson({ model: 'gpt-4o', messages }).length,
    };
  } finally {
    sub.unsubscribe();
    counter.dispose?.();
    await vault.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function main(_argv: string[]): Promise<void> {
  for (const fresh of [false, true]) {
    const r = await runSession(fresh);
    const label = fresh ? 'host rebuilds every message object (content-hash memo)' : 'host reuses its transcript objects (identity memo)';
    console.log(`\n${label}`);
    console.log(`  per request, median of turns 11–20:   ${r.at20.toFixed(2)} ms`);
    console.log(`  per request, median of turns 191–200: ${r.at200.toFixed(2)} ms`);
    console.log(`  ratio turn 200 / turn 20: ${(r.at200 / r.at20).toFixed(2)} (target ≤ 2)`);
    console.log(`  baseline, one whole-request serialize + tokenize: ${r.base20.toFixed(2)} ms at turn 20, ${r.base200.toFixed(2)} ms at turn 200 (ratio ${(r.base200 / r.base20).toFixed(2)})`);
    console.log(`  final request at turn 200: ${r.finalChars} chars (raw ${r.rawChars})`);
  }
}
