/**
 * The code reads top down: core → operators → runtime → hosts (adapters, CLI, replay, eval, report,
 * and the package entry src/index.ts that re-exports them).
 * A file may import its own layer or a lower one, never a higher one. Imports are read with
 * TypeScript's own pre-processor (static, type-only and dynamic imports alike) and resolved
 * relative to the importing file.
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
  if (path === 'src/runtime.ts' || path.startsWith('src/runtime/')) return 'runtime';
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
