/**
 * The tool-stream fixtures of the reference's structural benchmark (cases 1 and 2), shared
 * by `token-terminator bench`, `npm run bench -- tool` and the tests.
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const CASE1_COMMAND = 'git diff --no-color -- benchmark_fixture.txt';

/** Case 1: the same 8,000-line change in a fresh git repository at `root`; returns the real `git diff`. */
export function case1Diff(root: string): string {
  const git = (...args: string[]): string =>
    execFileSync('git', args, { cwd: root, encoding: 'utf8', maxBuffer: 64 << 20 });
  git('init', '-q');
  git('config', 'user.email', 'bench@example.com');
  git('config', 'user.name', 'Bench');
  git('config', 'commit.gpgsign', 'false');
  const file = join(root, 'benchmark_fixture.txt');
  writeFileSync(
    file,
    Array.from({ length: 8000 }, (_, i) => `original value ${String(i).padStart(5, '0')}\n`).join(''),
  );
  git('add', 'benchmark_fixture.txt');
  git('commit', '-qm', 'fixture');
  writeFileSync(
    file,
    Array.from(
      { length: 8000 },
      (_, i) => `changed value ${String(i).padStart(5, '0')}: repeated diagnostic evidence ${i % 11}\n`,
    ).join(''),
  );
  return git('diff', '--no-color', '--', 'benchmark_fixture.txt');
}

/** Case 2: 12,000 search lines, no trailing newline. */
export const nativeSearchFixture = (): string =>
  Array.from({ length: 12000 }, (_, i) => `src/module_${i % 40}.py:${i}: repeated match payload value=${i % 7}`).join(
    '\n',
  );
