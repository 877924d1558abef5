import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);

/** Every example is a self-asserting program: exit 0 means its outcome held (receipt seen, exact recovery, cap applied). */
describe('examples', () => {
  it.concurrent.each(['langgraph', 'openai-agents', 'custom-loop'])(
    '%s runs offline and exits 0',
    async (name) => {
      const { stdout } = await run(process.execPath, ['--import', 'tsx', `examples/${name}.ts`], {
        cwd: process.cwd(),
        timeout: 90_000,
        env: { ...process.env, NO_COLOR: '1' },
      });
      expect(stdout).toContain(`${name} example:`);
    },
    120_000,
  );
});
