/** The sample session the package ships (`replay --sample`, `report --sample`), found from this file. */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CliError } from './context.js';

const RELATIVE = join('examples', 'sessions', 'sample.jsonl');

/** The path of examples/sessions/sample.jsonl in the package root above this file (src/cli or dist/src/cli). */
export function samplePath(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let depth = 0; depth < 6; depth += 1) {
    const candidate = join(dir, RELATIVE);
    if (existsSync(candidate)) return candidate;
    const parent = dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
  throw new CliError(`the sample session (${RELATIVE}) is not in this copy of the package`, 1);
}
