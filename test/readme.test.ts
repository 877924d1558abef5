import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CONFIG_VARIABLES } from '../src/config/index.js';
import { DEFAULT_TOOL_NAMES } from '../src/tools/names.js';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

describe('README.md', () => {
  it('names every tool name recognised without configuration, and how to map others', () => {
    for (const name of Object.keys(DEFAULT_TOOL_NAMES)) expect(readme, name).toContain(`\`${name}\``);
    expect(readme).toContain('`TOKEN_TERMINATOR_TOOL_NAMES`');
  });

  it('documents the output-cap and model-limit switches', () => {
    for (const name of [
      'TOKEN_TERMINATOR_OUTPUT_CAP',
      'TOKEN_TERMINATOR_MODEL_LIMITS',
      'TOKEN_TERMINATOR_TOKEN_BUDGET',
    ]) {
      expect(CONFIG_VARIABLES).toContain(name);
      expect(readme).toContain(`\`${name}\``);
    }
  });

  it('says what /healthz answers as the proxy answers it (test/integration/proxy.test.ts)', () => {
    expect(readme).toContain('`/healthz`, which answers `{"status":"ok"}`');
    expect(readme).not.toMatch(/healthz`?, which says nothing but `ok`/);
  });

  it('keeps the quick start at exactly two commands', () => {
    const quick = /## Quick start\n\n```bash\n([\s\S]*?)```/.exec(readme)?.[1] ?? '';
    expect(quick.trim().split('\n')).toHaveLength(2);
  });

  it('has self-contained ts snippets importing the package by name (compiled against the tarball in CI)', () => {
    const blocks = [...readme.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1] ?? '');
    expect(blocks.length).toBeGreaterThanOrEqual(4);
    for (const code of blocks) {
      expect(code).toMatch(/from 'token-terminator(\/[a-z/-]+)?'/);
      expect(code).not.toContain('../src');
    }
  });
});
