/**
 * `npm run bench -- structural`: the reference's structural cases 3–8 through our
 * request stages, with the reference's output tokens beside ours (o200k_base), and the 7-case
 * aggregate (cases 1–2 are the tool stream's; their reference outputs stand in here).
 */
import { createTiktokenCounter } from '../src/measure/index.js';
import { runStructuralCases } from '../src/cli/bench/request-cases.js';
import { createVault } from '../src/vault/index.js';

export async function main(_argv: string[]): Promise<void> {
  const vault = await createVault({ path: ':memory:' });
  const counter = createTiktokenCounter('o200k_base');
  try {
    const started = performance.now();
    const results = await runStructuralCases(vault, counter);
    const ms = performance.now() - started;
    const pad = (s: string | number, n: number): string => String(s).padStart(n);
    console.log(
      `${'case'.padEnd(38)}${pad('raw tok', 10)}${pad('ours', 9)}${pad('reference', 11)}${pad('reduction', 11)}`,
    );
    for (const r of results) {
      const pct = ((1 - r.outputTokens / r.rawTokens) * 100).toFixed(2);
      console.log(
        `${r.name.padEnd(38)}${pad(r.rawTokens, 10)}${pad(r.outputTokens, 9)}${pad(r.referenceOutputTokens, 11)}${pad(`${pct} %`, 11)}`,
      );
    }
    const seven = results.filter((r) => r.name !== 'context_compaction_multi_turn');
    const raw = 152_074 + 190_999 + seven.reduce((n, r) => n + r.rawTokens, 0);
    const ours = 911 + 1_213 + seven.reduce((n, r) => n + r.outputTokens, 0);
    const ref = 911 + 1_213 + seven.reduce((n, r) => n + r.referenceOutputTokens, 0);
    console.log(
      `7-case aggregate (cases 1–2 at the reference's 911 and 1,213): ${raw} → ${ours} tokens, ${((1 - ours / raw) * 100).toFixed(2)} % (reference ${ref}, ${((1 - ref / raw) * 100).toFixed(2)} %)`,
    );
    console.log(`cases 3–8 ran in ${ms.toFixed(0)} ms`);
  } finally {
    counter.dispose?.();
    await vault.close();
  }
}
