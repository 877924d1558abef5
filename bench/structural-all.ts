/**
 * `npm run bench -- structural-all [--json]`: the whole structural benchmark, all 8
 * cases, as `token-terminator bench` prints it: case 1 through the built-in git-diff compactor
 * (and through rtk when it is on PATH), case 2 through native compression, cases 3–8 through the
 * request stages. The baseline is the raw input of each case, measured in the same run.
 */
import { run } from '../src/cli/program.js';

export async function main(argv: string[]): Promise<void> {
  const code = await run(['bench', ...(argv.includes('--json') ? ['--json'] : [])]);
  if (code !== 0) throw new Error(`structural-all: token-terminator bench exited ${code}`);
}
