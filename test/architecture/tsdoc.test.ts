/**
 * The public API documents itself: every exported function of a package entry point carries an
 * `@example`, every optional property of an exported `*Options` interface names its default with
 * `@defaultValue`, and no comment in the package code points at a document the package does not ship.
 * Read with the TypeScript compiler API over the entry points listed in package.json `exports`.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** Optional `*Options` properties with no default to name, and why. */
const NO_DEFAULT: Readonly<Record<string, string>> = {
  'VaultOptions.path': 'exactly one of path and url is required; neither has a default',
  'VaultOptions.url': 'exactly one of path and url is required; neither has a default',
};

/** Resolved configuration types: every field (required, as the loaders fill it in) names its default. */
const CONFIG_TYPES: ReadonlySet<string> = new Set(['Config', 'ProxyConfig']);

/** The source entry of each `exports` subpath: `./dist/src/index.d.ts` → `src/index.ts`. */
function entryPoints(): string[] {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
    exports: Record<string, string | { types?: string }>;
  };
  const out: string[] = [];
  for (const target of Object.values(pkg.exports)) {
    const types = typeof target === 'string' ? undefined : target.types;
    if (types === undefined) continue;
    out.push(join(ROOT, types.replace(/^\.\/dist\//, '').replace(/\.d\.ts$/, '.ts')));
  }
  return out;
}

function program(): ts.Program {
  return ts.createProgram(entryPoints(), {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    strict: true,
    noEmit: true,
    skipLibCheck: true,
  });
}

/** The node a declaration's doc comment is attached to (a `const` is documented on its statement). */
function documented(decl: ts.Declaration): ts.Node {
  return ts.isVariableDeclaration(decl) ? decl.parent.parent : decl;
}

function docText(decl: ts.Declaration): string {
  return ts
    .getJSDocCommentsAndTags(documented(decl))
    .map((d) => d.getText())
    .join('\n');
}

function where(decl: ts.Declaration): string {
  const file = decl.getSourceFile();
  const { line } = file.getLineAndCharacterOfPosition(decl.getStart());
  return `${relative(ROOT, file.fileName).split(sep).join('/')}:${line + 1}`;
}

interface PublicApi {
  /** Exported functions (declarations, or constants whose type is callable) without `@example`. */
  readonly withoutExample: string[];
  /** Optional properties of exported `*Options` types, and fields of the config types, without `@defaultValue`. */
  readonly withoutDefault: string[];
  /** Every property checked for a default, as `Type.property`. */
  readonly checkedProperties: ReadonlySet<string>;
  readonly functions: number;
  readonly optionalProperties: number;
}

function readPublicApi(): PublicApi {
  const prog = program();
  const checker = prog.getTypeChecker();
  const seen = new Set<ts.Declaration>();
  const withoutExample: string[] = [];
  const withoutDefault: string[] = [];
  const checkedProperties = new Set<string>();
  let functions = 0;
  let optionalProperties = 0;
  for (const entry of entryPoints()) {
    const file = prog.getSourceFile(entry);
    if (file === undefined) throw new Error(`entry point ${entry} not found`);
    const module = checker.getSymbolAtLocation(file);
    if (module === undefined) continue;
    for (const exported of checker.getExportsOfModule(module)) {
      const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      const decls = symbol.declarations ?? [];
      const first = decls[0];
      if (first === undefined || seen.has(first)) continue;
      seen.add(first);
      const callable =
        decls.some(ts.isFunctionDeclaration) ||
        (ts.isVariableDeclaration(first) &&
          checker.getTypeOfSymbolAtLocation(symbol, first).getCallSignatures().length > 0);
      if (callable) {
        functions++;
        if (!decls.some((d) => /@example/.test(docText(d)))) withoutExample.push(`${where(first)} ${exported.name}`);
      }
      const isConfig = CONFIG_TYPES.has(exported.name);
      if (
        (isConfig || /Options$/.test(exported.name)) &&
        symbol.flags & (ts.SymbolFlags.Interface | ts.SymbolFlags.TypeAlias)
      ) {
        // Own and inherited properties alike: a base interface's options are options of this one.
        for (const property of checker.getPropertiesOfType(checker.getDeclaredTypeOfSymbol(symbol))) {
          if (!isConfig && !(property.flags & ts.SymbolFlags.Optional)) continue;
          const declaration = property.declarations?.[0];
          if (declaration === undefined || declaration.getSourceFile().fileName.includes('/node_modules/')) continue;
          if (seen.has(declaration)) continue;
          seen.add(declaration);
          optionalProperties++;
          const name = `${exported.name}.${property.name}`;
          // A config group written inline (`incontext: { … }`) is checked field by field.
          const group =
            isConfig && ts.isPropertySignature(declaration) && declaration.type !== undefined
              ? declaration.type
              : undefined;
          const fields =
            group !== undefined && ts.isTypeLiteralNode(group)
              ? group.members.filter(ts.isPropertySignature).map((m) => [`${name}.${m.name.getText()}`, m] as const)
              : [[name, declaration] as const];
          for (const [field, node] of fields) {
            checkedProperties.add(field);
            if (field in NO_DEFAULT) continue;
            if (!/@defaultValue/.test(docText(node))) withoutDefault.push(`${where(node)} ${field}`);
          }
        }
      }
    }
  }
  return { withoutExample, withoutDefault, checkedProperties, functions, optionalProperties };
}

/** Every comment of a TypeScript source, read with the compiler's scanner (strings are not comments). */
function comments(text: string): { line: number; text: string }[] {
  const scanner = ts.createScanner(ts.ScriptTarget.Latest, false, ts.LanguageVariant.Standard, text);
  const out: { line: number; text: string }[] = [];
  const lineOf = (pos: number): number => text.slice(0, pos).split('\n').length;
  for (let kind = scanner.scan(); kind !== ts.SyntaxKind.EndOfFileToken; kind = scanner.scan()) {
    if (kind === ts.SyntaxKind.SingleLineCommentTrivia || kind === ts.SyntaxKind.MultiLineCommentTrivia)
      out.push({ line: lineOf(scanner.getTokenStart()), text: scanner.getTokenText() });
    // Template literals need the scanner's re-scan to find their end; a `}` that closes one resumes it.
    if (kind === ts.SyntaxKind.CloseBraceToken) scanner.reScanTemplateToken(false);
  }
  return out;
}

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...sources(path));
    else if (name.endsWith('.ts')) out.push(path);
  }
  return out;
}

/** Pointers at documents outside the package: the design notes, the fact sheets, issue numbers, ../shared. */
const OUTSIDE =
  /facts\s*§|(?<!RFC \d+ )§\s*\d|DESIGN\.md|STYLE\.md|\bfacts\/|\bseeds\/|\.\.\/shared\b|\bissue\s*#?\d+/i;

function outsideCitations(): string[] {
  const out: string[] = [];
  for (const dir of ['src', 'operators', 'adapters'])
    for (const path of sources(join(ROOT, dir)))
      for (const c of comments(readFileSync(path, 'utf8')))
        if (OUTSIDE.test(c.text))
          out.push(`${relative(ROOT, path).split(sep).join('/')}:${c.line} ${OUTSIDE.exec(c.text)![0]}`);
  return out;
}

describe('TSDoc of the public API', () => {
  const api = readPublicApi();

  it('reads the public API (the reader finds functions and options)', () => {
    expect(api.functions).toBeGreaterThan(100);
    expect(api.optionalProperties).toBeGreaterThan(50);
  });

  it('gives every exported function an @example', () => {
    expect(api.withoutExample).toEqual([]);
  });

  it('names the default of every optional option with @defaultValue', () => {
    expect(api.withoutDefault).toEqual([]);
  });

  it('lists exceptions only for options that exist', () => {
    expect(Object.keys(NO_DEFAULT).filter((n) => !api.checkedProperties.has(n))).toEqual([]);
  });
});

describe('comments stand alone', () => {
  it('finds a citation when one is there (the detector works)', () => {
    const found = comments(
      'const a = `x ${1} // not a comment`; // see facts §3\n/* DESIGN.md */ const b = "issue 5";',
    );
    expect(found.map((c) => OUTSIDE.test(c.text))).toEqual([true, true]);
  });

  it('cites no document outside the package in src, operators or adapters', () => {
    expect(outsideCitations()).toEqual([]);
  });
});
