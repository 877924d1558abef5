import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const json = (file: string): Record<string, unknown> =>
  JSON.parse(readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8')) as Record<string, unknown>;

describe('the published build', () => {
  it('ships no source map that points to a .ts file the package does not ship', () => {
    const build = json('tsconfig.build.json')['compilerOptions'] as Record<string, unknown>;
    const files = json('package.json')['files'] as string[];
    const shipsSources = ['src', 'operators', 'adapters'].every((d) => files.includes(d));
    const maps = build['sourceMap'] !== false || build['declarationMap'] === true;
    expect(!maps || shipsSources || build['inlineSources'] === true).toBe(true);
  });
});
