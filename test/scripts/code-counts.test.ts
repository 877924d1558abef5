/** The counting script behind a structural change's closing note, run on small fixtures. */
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ts from 'typescript';
import { afterAll, describe, expect, it } from 'vitest';
import {
  ALLOWED,
  countCode,
  entryPoints,
  functionLengthsOf,
  linesUnder,
  MAX_FUNCTION_LINES,
  MAX_MAIN_ENTRY_NAMES,
  MAX_OPERATOR_FILE_LINES,
  mutableSitesOf,
  operatorFileTooLong,
  tsFiles,
  valueExportsOf,
} from '../../scripts/code-counts.js';

const FIXTURE = `
import { LRUCache } from 'lru-cache';
let counter = 0;
var legacy = 1;
const TABLE = new Set(['a', 'b']);
const memo = new Map<string, number>();
const weak = new WeakMap<object, number>();
const cache = new LRUCache<string, string>({ max: 10 });
const PATTERN = new RegExp('x');
const FROZEN = Object.freeze({ a: 1 });
const pending: string[] = [];
const READ_ONLY = ['x', 'y'];
const stats = { hits: 0 };
const bumped = { n: 0 };
const made = makeCache();
const registry = createRegistry();
const req = createRequire(import.meta.url);
const parsed = JSON.parse('{}');
export function touch(key: string, o: object): number {
  counter++;
  memo.set(key, TABLE.has(key) ? 1 : 0);
  weak.set(o, 1);
  pending.push(key);
  stats.hits += 1;
  bumped.n++;
  made.set(key, 1);
  const local = new Map<string, number>();
  local.set(key, 1);
  return READ_ONLY.length + (FROZEN.a ?? 0) + legacy + cache.size + (PATTERN.test(key) ? 1 : 0);
}
`;

describe('module-level mutable sites', () => {
  it('names let and var bindings, mutated collections and literals, and class instances, and nothing else', () => {
    const sites = mutableSitesOf('fixture.ts', FIXTURE);
    expect(sites.map((s) => `${s.name}:${s.kind}`)).toEqual([
      'counter:let',
      'legacy:var',
      'memo:mutated-collection',
      'weak:mutated-collection',
      'cache:instance',
      'pending:mutated-literal',
      'stats:mutated-literal',
      'bumped:mutated-literal',
      'made:call-result',
      'registry:call-result',
    ]);
    expect(sites[0]).toMatchObject({ file: 'fixture.ts', line: 3 });
  });

  it('finds none in a file of constants and functions', () => {
    expect(mutableSitesOf('f.ts', `const A = new Set([1]);\nexport const f = (x: number) => A.has(x);\n`)).toEqual([]);
  });

  it('sees state behind `++`, a mutated call result and a factory, not a stateless factory or a read call result', () => {
    const names = (text: string): string[] => mutableSitesOf('f.ts', text).map((s) => s.name);
    expect(names(`const s = { n: 0 };\nexport const f = () => --s.n;\n`)).toEqual(['s']);
    expect(names(`const m = makeCache();\nexport const f = () => (m.map[1] = 2);\n`)).toEqual(['m']);
    expect(names(`const m = build();\nexport const f = () => m.get(1);\n`)).toEqual([]);
    expect(names(`const m = createThing();\n`)).toEqual(['m']);
    expect(names(`const r = createRequire(import.meta.url);\nconst o = Object.freeze({ a: 1 });\n`)).toEqual([]);
  });

  it('finds no module-level mutable site in the package outside the allow-list', () => {
    const root = join(import.meta.dirname, '..', '..');
    const outside = ['src', 'operators', 'adapters']
      .flatMap((d) => tsFiles(root, d))
      .flatMap((f) => mutableSitesOf(f, readFileSync(join(root, f), 'utf8')))
      .filter((s) => ALLOWED[`${s.file}:${s.name}`] === undefined)
      .map((s) => `${s.file}:${s.line} ${s.name} (${s.kind})`);
    expect(outside).toEqual([]);
  });

  it('allows only sites that exist, each with a reason', () => {
    const root = join(import.meta.dirname, '..', '..');
    for (const [key, reason] of Object.entries(ALLOWED)) {
      const [file, name] = key.split(':') as [string, string];
      const sites = mutableSitesOf(file, readFileSync(join(root, file), 'utf8'));
      expect(
        sites.map((s) => s.name),
        key,
      ).toContain(name);
      expect(reason.length).toBeGreaterThan(20);
    }
  });
});

describe('function lengths', () => {
  it('measures each function, nested ones apart, counting lines spanned and lines of code', () => {
    const text = [
      'export function outer(): number {', // 1
      '  // a comment', // 2
      '', // 3
      '  const inner = (x: number) => {', // 4
      '    return x + 1;', // 5
      '  };', // 6
      '  return inner(1);', // 7
      '}', // 8
      'class K {', // 9
      '  method(): void {}', // 10
      '}', // 11
    ].join('\n');
    const lengths = functionLengthsOf('f.ts', text);
    expect(lengths).toEqual([
      { file: 'f.ts', line: 1, name: 'outer', lines: 8, codeLines: 6 },
      { file: 'f.ts', line: 4, name: 'inner', lines: 3, codeLines: 3 },
      { file: 'f.ts', line: 10, name: 'K.method', lines: 1, codeLines: 1 },
    ]);
  });
});

/** A function of `n` lines of code, written as `head` opens it (`function f() {`, `const f = () => {`, …). */
const bodyOf = (head: string, n: number, tail = '}'): string =>
  [head, ...Array.from({ length: n - 2 }, (_, i) => `  const v${i} = ${i};`), tail].join('\n');

describe('long functions and the reason they may stay long', () => {
  it('reads a `// long:` comment above a declaration, a const and a property, and no other comment', () => {
    const text = [
      '/** Docs. */',
      '// long: a store of small methods',
      bodyOf('export function a(): void {', 3),
      '// long: why b stays long',
      bodyOf('export const b = (): void => {', 3, '};'),
      '// not long: a plain comment',
      bodyOf('function c(): void {', 3),
      'const o = {',
      '  // long: a method',
      bodyOf('  d(): void {', 3, '  },'),
      '  // long: an arrow property',
      bodyOf('  e: (): void => {', 3, '  },'),
      '};',
      'export const uses = [c, o];',
    ].join('\n');
    const byName = Object.fromEntries(functionLengthsOf('f.ts', text).map((f) => [f.name, f.long]));
    expect(byName).toEqual({
      a: 'a store of small methods',
      b: 'why b stays long',
      c: undefined,
      d: 'a method',
      e: 'an arrow property',
    });
  });

  it('lists functions over the limit without a reason apart from those with one, and operator files over theirs', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tt-counts-long-'));
    try {
      for (const d of ['src', 'operators', 'adapters']) mkdirSync(join(dir, d));
      writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { noEmit: true } }));
      writeFileSync(join(dir, 'package.json'), JSON.stringify({ exports: {} }));
      writeFileSync(
        join(dir, 'src/a.ts'),
        [
          bodyOf('export function fits(): void {', MAX_FUNCTION_LINES),
          bodyOf('export function over(): void {', MAX_FUNCTION_LINES + 1),
          '// long: one closure over shared statements',
          bodyOf('export function explained(): void {', MAX_FUNCTION_LINES + 1),
        ].join('\n'),
      );
      const filler = Array.from({ length: MAX_OPERATOR_FILE_LINES }, (_, i) => `export const x${i} = ${i};`);
      writeFileSync(join(dir, 'operators/big.ts'), `${filler.join('\n')}\nexport const last = 0;\n`);
      writeFileSync(join(dir, 'operators/why.ts'), `// long: a reason\n${filler.join('\n')}\n`);
      writeFileSync(join(dir, 'operators/small.ts'), `${filler.join('\n')}\n`);
      const counts = countCode(dir);
      expect(counts.longWithoutReason.map((f) => f.name)).toEqual(['over']);
      expect(counts.longWithReason.map((f) => [f.name, f.long])).toEqual([
        ['explained', 'one closure over shared statements'],
      ]);
      expect(counts.longOperatorFiles).toEqual([{ file: 'operators/big.ts', lines: MAX_OPERATOR_FILE_LINES + 1 }]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('lets an operator file over the limit stay with a `// long:` comment in its header only', () => {
    const lines = Array.from({ length: MAX_OPERATOR_FILE_LINES + 5 }, (_, i) => `export const x${i} = ${i};`);
    expect(operatorFileTooLong(`/** Header. */\n${lines.join('\n')}\n`)).toBe(true);
    expect(operatorFileTooLong(`/** Header. */\n// long: why\n${lines.join('\n')}\n`)).toBe(false);
    expect(operatorFileTooLong(`${lines.join('\n')}\n// long: too late\nexport const z = 1;\n`)).toBe(true);
  });
});

describe('exported runtime names, lines and entry points', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tt-counts-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(join(dir, 'src'));
  writeFileSync(
    join(dir, 'src/a.ts'),
    'export const one = 1;\nexport function two(): number { return 2; }\nexport class Three {}\nexport interface Four { x: number }\nexport type Five = string;\nexport enum Six { A }\n',
  );
  writeFileSync(join(dir, 'src/b.ts'), 'export class Seven {}\nexport const eight = 8;\n');
  writeFileSync(
    join(dir, 'src/index.ts'),
    "export * from './a.js';\nexport type * from './b.js';\nexport { eight as nine } from './b.js';\nexport type { Three as Ten } from './a.js';\n",
  );
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify({
      exports: {
        '.': { types: './dist/src/index.d.ts', default: './dist/src/index.js' },
        './package.json': './package.json',
      },
    }),
  );

  it('counts values only: type-only re-exports, interfaces and type aliases are left out', () => {
    const file = join(dir, 'src/index.ts');
    const program = ts.createProgram([file], {
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
      noEmit: true,
    });
    expect(valueExportsOf(program, file)).toEqual(['Six', 'Three', 'nine', 'one', 'two']);
  });

  it(`keeps the main entry at ${MAX_MAIN_ENTRY_NAMES} runtime names or fewer`, () => {
    const root = join(import.meta.dirname, '..', '..');
    const file = join(root, entryPoints(root)['.']!);
    const program = ts.createProgram([file], {
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
      noEmit: true,
    });
    const names = valueExportsOf(program, file);
    expect(names.length).toBeGreaterThan(40);
    expect(names.length).toBeLessThanOrEqual(MAX_MAIN_ENTRY_NAMES);
  });

  it('maps package.json exports to their source files and counts lines', () => {
    expect(entryPoints(dir)).toEqual({ '.': 'src/index.ts' });
    expect(linesUnder(dir, 'src')).toBe(6 + 2 + 4);
  });
});
