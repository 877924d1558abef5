/**
 * `npm run bench -- [name] [args…]`: runs one benchmark (or all of them) in this process.
 * Every benchmark measures its baseline in the same run and prints ratios against it.
 */
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const available = readdirSync(here)
  .filter((f) => f.endsWith('.ts') && f !== 'run.ts' && !f.startsWith('_'))
  .map((f) => f.slice(0, -3))
  .sort();

const [name, ...rest] = process.argv.slice(2);
const selected = name === undefined || name === 'all' ? available : [name];
for (const bench of selected) {
  if (!available.includes(bench)) {
    console.error(`unknown benchmark "${bench}"; available: ${available.join(', ')}`);
    process.exit(2);
  }
  console.log(`\n## bench ${bench}`);
  const mod = (await import(join(here, `${bench}.ts`))) as { main: (argv: string[]) => Promise<void> };
  await mod.main(rest);
}
