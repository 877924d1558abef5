import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { MissingPackageError, OPTIONAL_PACKAGES, TokenTerminatorError } from '../src/index.js';
import { loadOptionalPackage } from '../src/optional-package.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A `require` rooted in an empty temp project, with `packages` (name → index.js source) installed. */
function projectRequire(packages: Record<string, string> = {}): NodeJS.Require {
  const dir = mkdtempSync(join(tmpdir(), 'tt-optional-'));
  dirs.push(dir);
  for (const [name, source] of Object.entries(packages)) {
    mkdirSync(join(dir, 'node_modules', name), { recursive: true });
    writeFileSync(join(dir, 'node_modules', name, 'package.json'), JSON.stringify({ name, main: 'index.js' }));
    writeFileSync(join(dir, 'node_modules', name, 'index.js'), source);
  }
  return createRequire(join(dir, 'entry.js'));
}

describe('loadOptionalPackage', () => {
  it('names the missing package, what needs it and the install command', () => {
    const error = (() => {
      try {
        loadOptionalPackage('pg', projectRequire());
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(MissingPackageError);
    expect(error).toBeInstanceOf(TokenTerminatorError);
    const e = error as MissingPackageError;
    expect(e.code).toBe('E_MISSING_PACKAGE');
    expect(e.packageName).toBe('pg');
    expect(e.message).toContain('npm install pg@^8.23.1');
    expect(e.message).toContain('PostgreSQL');
  });

  it('names the packages one feature needs together in one install command (the report: plot and linkedom)', () => {
    for (const name of ['@observablehq/plot', 'linkedom'] as const) {
      let error: unknown;
      try {
        loadOptionalPackage(name, projectRequire());
      } catch (e) {
        error = e;
      }
      const e = error as MissingPackageError;
      expect(e.packageName).toBe(name);
      expect(e.installCommand).toMatch(/^npm install \S+ \S+$/);
      for (const both of ['@observablehq/plot@^0.6.17', 'linkedom@^0.18.15']) expect(e.installCommand).toContain(both);
      expect(e.message).toContain(e.installCommand);
    }
  });

  it('loads an installed package', () => {
    const from = projectRequire({ linkedom: 'module.exports = { parseHTML: () => "doc" };' });
    expect(loadOptionalPackage<{ parseHTML: () => string }>('linkedom', from).parseHTML()).toBe('doc');
  });

  it("rethrows a missing dependency of an installed package as it is, not as the package's absence", () => {
    const from = projectRequire({ tiktoken: "require('tt-not-installed-anywhere');" });
    expect(() => loadOptionalPackage('tiktoken', from)).toThrow(/tt-not-installed-anywhere/);
    expect(() => loadOptionalPackage('tiktoken', from)).not.toThrow(MissingPackageError);
  });

  it('declares every optional package as an optional peer, with the range the error names, and as a dev dependency', () => {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
      dependencies: Record<string, string>;
      devDependencies: Record<string, string>;
      peerDependencies: Record<string, string>;
      peerDependenciesMeta: Record<string, { optional?: boolean }>;
    };
    for (const [name, { range }] of Object.entries(OPTIONAL_PACKAGES)) {
      expect(pkg.peerDependencies[name], name).toBe(range);
      expect(pkg.peerDependenciesMeta[name]?.optional, name).toBe(true);
      expect(pkg.dependencies[name], name).toBeUndefined();
      expect(pkg.devDependencies[name], name).toBeDefined();
    }
  });
});
