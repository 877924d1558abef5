/**
 * The code reads top down: core → operators → runtime → hosts (adapters, CLI, replay, eval, report,
 * and the package entry src/index.ts that re-exports them).
 * A file may import its own layer or a lower one, never a higher one. Imports are read with
 * TypeScript's own pre-processor (static, type-only and dynamic imports alike) and resolved
 * relative to the importing file.
 *
 * The library does not carry its tooling: from every package entry point but the tooling's own
 * (`./report`), and from every operator and adapter file, no chain of imports reaches src/replay,
 * src/eval, src/report, src/cli or bench/.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

const LAYERS = ['core', 'operators', 'runtime', 'hosts'] as const;
type Layer = (typeof LAYERS)[number];

/** The layer of a repository path (posix separators), or undefined for files outside the package code. */
export function layerOf(path: string): Layer | undefined {
  if (path.startsWith('operators/')) return 'operators';
  // The runtime's types (the Terminator contract) are what core modules such as recovery program against.
  if (path === 'src/runtime/types.ts') return 'core';
  if (path.startsWith('src/runtime/')) return 'runtime';
  if (path === 'src/index.ts' || /^src\/(cli|replay|eval|report)\//.test(path) || path.startsWith('adapters/'))
    return 'hosts';
  if (path.startsWith('src/')) return 'core';
  return undefined;
}

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(join(ROOT, dir))) {
    const rel = `${dir}/${name}`;
    if (statSync(join(ROOT, rel)).isDirectory()) out.push(...sources(rel));
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(rel);
  }
  return out;
}

/** Every relative import of a file, resolved to a repository path. */
function importsOf(path: string): string[] {
  const info = ts.preProcessFile(readFileSync(join(ROOT, path), 'utf8'), true, true);
  return info.importedFiles
    .map((f) => f.fileName)
    .filter((spec) => spec.startsWith('.'))
    .map((spec) =>
      relative(ROOT, resolve(ROOT, dirname(path), spec))
        .split(sep)
        .join('/')
        .replace(/\.js$/, '.ts'),
    );
}

const TOOLING = /^(src\/(replay|eval|report|cli)\/|bench\/)/;

/** Entry points of the package that are tooling themselves, and may import it. */
const TOOLING_ENTRIES = new Set(['./report']);

/**
 * A shortest chain of imports from `root` to a tooling file, or undefined when none exists. Breadth
 * first over `importsOf`, so the chain names each file on the way.
 */
export function chainToTooling(
  root: string,
  imports: (path: string) => readonly string[],
  isTooling: (path: string) => boolean = (p) => TOOLING.test(p),
): string[] | undefined {
  const parent = new Map<string, string | null>([[root, null]]);
  const queue = [root];
  while (queue.length > 0) {
    const file = queue.shift()!;
    if (isTooling(file)) {
      const chain: string[] = [];
      for (let at: string | null = file; at !== null; at = parent.get(at) ?? null) chain.unshift(at);
      return chain;
    }
    for (const next of imports(file)) {
      if (parent.has(next)) continue;
      parent.set(next, file);
      queue.push(next);
    }
  }
  return undefined;
}

/** The library's roots: package entry points (but the tooling's own), every operator and adapter file. */
function libraryRoots(): string[] {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
    exports: Record<string, string | { default: string }>;
  };
  const entries = Object.entries(pkg.exports)
    .filter(([subpath, target]) => !TOOLING_ENTRIES.has(subpath) && typeof target !== 'string')
    .map(([, target]) => (target as { default: string }).default.replace(/^\.\/dist\//, '').replace(/\.js$/, '.ts'));
  return [...new Set([...entries, ...sources('operators'), ...sources('adapters')])];
}

describe('layering', () => {
  const files = [...sources('src'), ...sources('operators'), ...sources('adapters')];

  it('classifies every package file', () => {
    expect(files.length).toBeGreaterThan(100);
    expect(files.filter((f) => layerOf(f) === undefined)).toEqual([]);
  });

  it('no file imports a higher layer', () => {
    const violations: string[] = [];
    for (const file of files) {
      const from = LAYERS.indexOf(layerOf(file)!);
      for (const target of importsOf(file)) {
        const layer = layerOf(target);
        if (layer !== undefined && LAYERS.indexOf(layer) > from)
          violations.push(`${file} (${layerOf(file)}) → ${target} (${layer})`);
      }
    }
    expect(violations).toEqual([]);
  });

  it('an adapter imports its own folder, adapters/shared and the layers below, never a sibling adapter', () => {
    const adapterOf = (path: string): string | undefined => /^adapters\/([^/]+)\//.exec(path)?.[1];
    const violations: string[] = [];
    for (const file of files) {
      const own = adapterOf(file);
      if (own === undefined) continue;
      for (const target of importsOf(file)) {
        const other = adapterOf(target);
        if (other !== undefined && other !== own && other !== 'shared') violations.push(`${file} → ${target}`);
      }
    }
    expect(violations).toEqual([]);
  });

  it('no package entry point, operator or adapter reaches replay, eval, report, the CLI or bench', () => {
    const roots = libraryRoots();
    expect(roots).toContain('src/index.ts');
    expect(roots).toContain('operators/index.ts');
    expect(roots).toContain('adapters/proxy/index.ts');
    expect(roots).not.toContain('src/report/index.ts');
    const chains = roots
      .map((root) => chainToTooling(root, importsOf))
      .filter((chain): chain is string[] => chain !== undefined)
      .map((chain) => chain.join(' → '));
    expect(chains).toEqual([]);
  });

  it('names the whole chain to a tooling file', () => {
    const graph: Record<string, string[]> = {
      'src/index.ts': ['src/a.ts', 'src/b.ts'],
      'src/a.ts': ['src/c.ts'],
      'src/b.ts': [],
      'src/c.ts': ['src/replay/replay.ts'],
    };
    expect(chainToTooling('src/index.ts', (f) => graph[f] ?? [])).toEqual([
      'src/index.ts',
      'src/a.ts',
      'src/c.ts',
      'src/replay/replay.ts',
    ]);
    expect(chainToTooling('src/b.ts', (f) => graph[f] ?? [])).toBeUndefined();
    expect(chainToTooling('operators/x.ts', () => ['bench/run.ts'])).toEqual(['operators/x.ts', 'bench/run.ts']);
  });

  it('would catch an upward import', () => {
    expect(LAYERS.indexOf(layerOf('src/compile/history.ts')!)).toBeLessThan(
      LAYERS.indexOf(layerOf('operators/compile-request.ts')!),
    );
    expect(layerOf('src/cli/bench/request-cases.ts')).toBe('hosts');
    expect(layerOf('adapters/proxy/server.ts')).toBe('hosts');
    expect(layerOf('src/runtime/pipelines.ts')).toBe('runtime');
    expect(layerOf('src/budget/pressure.ts')).toBe('core');
  });
});
