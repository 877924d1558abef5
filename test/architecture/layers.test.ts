/**
 * The code reads top down: core → operators → runtime → hosts (adapters, CLI, replay, eval, report,
 * and the package entry src/index.ts that re-exports them).
 * A file may import its own layer or a lower one, never a higher one. Imports are read with
 * TypeScript's own pre-processor (static, type-only and dynamic imports alike) and resolved
 * relative to the importing file.
 *
 * Within the core, folders (src/<folder>; a file directly in src/ counts as one) form no cycle:
 * a helper several folders need lives in a folder below all of them, so each folder can be read with
 * only the folders under it in mind.
 *
 * Adapters translate types: none imports src/compile or src/compact (they reach the stages through
 * the runtime, the operators or a lower folder).
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

/** The folder of a core file, `src/<folder>`; a file directly in src/ is a node of its own. */
function folderOf(path: string): string {
  return /^src\/[^/]+(?=\/)/.exec(path)?.[0] ?? path;
}

/**
 * The import cycles between folders of the core, one per strongly connected component of the folder
 * graph (Tarjan), each named as a closed walk `a → b → … → a` with one file-level import per hop.
 */
export function folderCycles(files: readonly string[], imports: (path: string) => readonly string[]): string[] {
  const edges = new Map<string, Map<string, string>>();
  for (const file of files) {
    if (layerOf(file) !== 'core') continue;
    for (const target of imports(file)) {
      if (layerOf(target) !== 'core' || folderOf(target) === folderOf(file)) continue;
      const out = edges.get(folderOf(file)) ?? new Map<string, string>();
      if (!out.has(folderOf(target))) out.set(folderOf(target), `${file} → ${target}`);
      edges.set(folderOf(file), out);
    }
  }
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const components: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    for (const w of (edges.get(v) ?? new Map<string, string>()).keys()) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (stack.includes(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    for (let w = stack.pop()!; ; w = stack.pop()!) {
      component.push(w);
      if (w === v) break;
    }
    if (component.length > 1) components.push(component.sort());
  };
  for (const v of [...edges.keys()].sort()) if (!index.has(v)) visit(v);
  // A closed walk through every folder of the component, breadth first from one to the next.
  return components.map((component) => {
    const inside = new Set(component);
    const path = (from: string, to: string): string[] => {
      const parent = new Map<string, string>([[from, from]]);
      const queue = [from];
      while (queue.length > 0) {
        const at = queue.shift()!;
        for (const next of (edges.get(at) ?? new Map<string, string>()).keys()) {
          if (!inside.has(next) || parent.has(next)) continue;
          parent.set(next, at);
          if (next === to) {
            const hops = [to];
            for (let p = at; p !== from; p = parent.get(p)!) hops.unshift(p);
            return hops;
          }
          queue.push(next);
        }
      }
      return [];
    };
    const walk = [component[0]!];
    for (const next of [...component.slice(1), component[0]!]) walk.push(...path(walk[walk.length - 1]!, next));
    return walk
      .slice(1)
      .map((to, i) => `${walk[i]} → ${to} (${edges.get(walk[i]!)!.get(to)!})`)
      .join('\n');
  });
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

  it('no two folders of the core import each other, directly or around a cycle', () => {
    expect(folderCycles(files, importsOf)).toEqual([]);
  });

  it('names every hop of a folder cycle, and ignores imports inside a folder', () => {
    const graph: Record<string, string[]> = {
      'src/a/x.ts': ['src/b/y.ts', 'src/a/z.ts'],
      'src/a/z.ts': ['src/a/x.ts'],
      'src/b/y.ts': ['src/c/w.ts'],
      'src/c/w.ts': ['src/a/z.ts', 'src/step.ts'],
      'src/step.ts': [],
      'src/runtime/pipelines.ts': ['src/a/x.ts'],
    };
    expect(folderCycles(Object.keys(graph), (f) => graph[f] ?? [])).toEqual([
      [
        'src/a → src/b (src/a/x.ts → src/b/y.ts)',
        'src/b → src/c (src/b/y.ts → src/c/w.ts)',
        'src/c → src/a (src/c/w.ts → src/a/z.ts)',
      ].join('\n'),
    ]);
    delete graph['src/c/w.ts'];
    expect(folderCycles(Object.keys(graph), (f) => graph[f] ?? [])).toEqual([]);
  });

  it('no adapter imports src/compile or src/compact', () => {
    const violations = files
      .filter((file) => file.startsWith('adapters/'))
      .flatMap((file) => importsOf(file).map((target) => `${file} → ${target}`))
      .filter((edge) => /→ src\/(compile|compact)\//.test(edge));
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
