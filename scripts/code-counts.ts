/**
 * Code counts for the closing note of a structural change: module-level mutable sites, runtime names
 * exported per package entry point, lines of code, and the longest functions. Run with
 * `npx tsx scripts/code-counts.ts` (or `npm run counts`); `--json` prints the same figures as JSON.
 *
 * What counts as a module-level mutable site (top-level statements of a file only):
 * - every top-level `let` or `var` binding;
 * - a top-level `const` initialised with a Map, Set, WeakMap, WeakSet, array or object literal (or
 *   `new Map/Set/WeakMap/WeakSet/Array(...)`) that the same file mutates: a call of a mutating method on
 *   it (set, add, delete, clear, push, splice, …), an assignment or `delete` through it, or
 *   `Object.assign(name, …)`, `++`/`--` through it. A table filled once and only read is not a site; a
 *   literal wrapped in `Object.freeze(...)` is never one;
 * - a top-level `const` initialised with a call (`makeCache()`, `createRegistry(…)`) whose result the
 *   same file mutates as above, or of a factory (a callee named `create…`/`make…`): what a call returns
 *   may hold state whatever the file does with it. `Object.freeze(...)` is not such a call;
 * - a top-level `const` initialised with `new X(...)` of any other class (an LRU cache, a memo, a
 *   registry: its methods may change it whatever the file calls), unless X is one of the immutable
 *   built-ins in IMMUTABLE_CLASSES.
 * A collection exported and mutated only in another file is not seen (none is, as of this script).
 * Sites named in ALLOWED are reported apart, each with the reason it may stay.
 *
 * Functions longer than MAX_FUNCTION_LINES lines of code, and operator files longer than
 * MAX_OPERATOR_FILE_LINES lines, need a reason: a line comment `// long: why` directly above the
 * function (above its declaration, the `const` it initialises, or the property it is the value of) or,
 * for an operator file, anywhere among the comments before its first statement. Those without one are
 * listed apart, so a change that grows one past the limit shows up.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

export interface MutableSite {
  readonly file: string;
  readonly line: number;
  readonly name: string;
  readonly kind: 'let' | 'var' | 'instance' | 'mutated-collection' | 'mutated-literal' | 'call-result';
}

export interface FunctionLength {
  readonly file: string;
  readonly line: number;
  readonly name: string;
  /** Lines from the first token to the closing brace. */
  readonly lines: number;
  /** Of those, lines holding code (not blank, not only a comment). */
  readonly codeLines: number;
  /** The reason a `// long:` comment directly above the function gives for its length, if any. */
  readonly long?: string;
}

/** The longest a function may be, in lines of code, without a `// long:` comment saying why. */
export const MAX_FUNCTION_LINES = 80;
/** The most runtime names the package's main entry (`.`) may export. */
export const MAX_MAIN_ENTRY_NAMES = 80;
/** The longest an operator file may be, in lines, without a `// long:` comment saying why. */
export const MAX_OPERATOR_FILE_LINES = 200;

/** Classes whose instances hold no state a caller can change. */
const IMMUTABLE_CLASSES: ReadonlySet<string> = new Set([
  'RegExp',
  'TextEncoder',
  'TextDecoder',
  'URL',
  'Error',
  'TypeError',
  'RangeError',
  'Intl.Segmenter',
  'Intl.NumberFormat',
  'Intl.DateTimeFormat',
  'Intl.Collator',
]);

/** Built-in collections: a site only when the file changes them after building them. */
const COLLECTIONS: ReadonlySet<string> = new Set(['Map', 'Set', 'WeakMap', 'WeakSet', 'Array']);

const MUTATING_METHODS: ReadonlySet<string> = new Set([
  'set',
  'add',
  'delete',
  'clear',
  'push',
  'pop',
  'shift',
  'unshift',
  'splice',
  'sort',
  'reverse',
  'fill',
  'copyWithin',
]);

/**
 * Module-level mutable sites that may stay, keyed `file:name`, each with why. Immutable tables are not
 * sites by the rule above; what is listed here holds state on purpose.
 */
export const ALLOWED: Readonly<Record<string, string>> = Object.freeze({
  'src/measure/long-runs.ts:table':
    'an immutable table filled on demand: the class of each UTF-16 code unit, a pure function of the unit (64 KiB)',
  'src/budget/model-limits.ts:lookupModelLimits':
    'the built-in model lookup, public; its only state is a bounded (256) memo of a pure function of the model name over the built-in table',
  'src/budget/registry.ts:defaultCounterRegistry':
    'the public process-wide counter registry that registerCounter adds to (a documented API; the budget operator takes its own `registry` option)',
  'src/measure/canonical-json.ts:walks':
    'process-wide counts of serializations that benches read as differences around their work; nothing the library decides reads them',
  'src/measure/encoders.ts:require':
    "node's module cache is process-wide by nature: a loaded BPE table is dropped from it so that the reference count frees it",
  'src/measure/encoders.ts:shared':
    'the loaded tokenizer tables (immutable BPE ranks, tens of MB each), shared by reference count and freed by the last counter that releases them',
});

/** A callee whose name says it builds an object (and may give it state). */
const FACTORY = /^(create|make)[A-Z]/u;
/** Factories whose result holds no state of the file's own (node's `require` reads the process's module cache). */
const STATELESS_FACTORIES: ReadonlySet<string> = new Set(['createRequire']);

function parse(file: string, text: string): ts.SourceFile {
  return ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, true, ts.ScriptKind.TS);
}

function lineOf(sf: ts.SourceFile, pos: number): number {
  return sf.getLineAndCharacterOfPosition(pos).line + 1;
}

function unwrap(expr: ts.Expression): ts.Expression {
  let e = expr;
  while (
    ts.isAsExpression(e) ||
    ts.isSatisfiesExpression(e) ||
    ts.isParenthesizedExpression(e) ||
    ts.isTypeAssertionExpression(e)
  )
    e = e.expression;
  return e;
}

/** The root identifier of `a.b[c].d`, if the chain starts at an identifier. */
function rootName(expr: ts.Expression): string | undefined {
  let e = unwrap(expr);
  while (ts.isPropertyAccessExpression(e) || ts.isElementAccessExpression(e)) e = unwrap(e.expression);
  return ts.isIdentifier(e) ? e.text : undefined;
}

/** Names the file mutates through a method call, an assignment, `++`/`--`, `delete` or `Object.assign`. */
function mutatedNames(sf: ts.SourceFile): Set<string> {
  const out = new Set<string>();
  const visit = (node: ts.Node): void => {
    if (ts.isCallExpression(node)) {
      const callee = unwrap(node.expression);
      if (ts.isPropertyAccessExpression(callee) && MUTATING_METHODS.has(callee.name.text)) {
        const root = rootName(callee.expression);
        if (root !== undefined) out.add(root);
      }
      if (callee.getText(sf) === 'Object.assign' && node.arguments[0] !== undefined) {
        const root = rootName(node.arguments[0]);
        if (root !== undefined) out.add(root);
      }
    }
    if (
      ts.isBinaryExpression(node) &&
      node.operatorToken.kind >= ts.SyntaxKind.FirstAssignment &&
      node.operatorToken.kind <= ts.SyntaxKind.LastAssignment
    ) {
      const left = unwrap(node.left);
      if (ts.isPropertyAccessExpression(left) || ts.isElementAccessExpression(left)) {
        const root = rootName(left);
        if (root !== undefined) out.add(root);
      }
    }
    if (
      (ts.isPrefixUnaryExpression(node) || ts.isPostfixUnaryExpression(node)) &&
      (node.operator === ts.SyntaxKind.PlusPlusToken || node.operator === ts.SyntaxKind.MinusMinusToken)
    ) {
      const operand = unwrap(node.operand);
      if (ts.isPropertyAccessExpression(operand) || ts.isElementAccessExpression(operand)) {
        const root = rootName(operand);
        if (root !== undefined) out.add(root);
      }
    }
    if (ts.isDeleteExpression(node)) {
      const root = rootName(node.expression);
      if (root !== undefined) out.add(root);
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out;
}

/** The module-level mutable sites of one file's text (see the rule at the top of this file). */
export function mutableSitesOf(file: string, text: string): MutableSite[] {
  const sf = parse(file, text);
  const mutated = mutatedNames(sf);
  const sites: MutableSite[] = [];
  for (const stmt of sf.statements) {
    if (!ts.isVariableStatement(stmt)) continue;
    const flags = stmt.declarationList.flags;
    const keyword = flags & ts.NodeFlags.Let ? 'let' : flags & ts.NodeFlags.Const ? 'const' : 'var';
    for (const decl of stmt.declarationList.declarations) {
      if (!ts.isIdentifier(decl.name)) continue;
      const name = decl.name.text;
      const line = lineOf(sf, decl.getStart(sf));
      if (keyword !== 'const') {
        sites.push({ file, line, name, kind: keyword });
        continue;
      }
      if (decl.initializer === undefined) continue;
      const init = unwrap(decl.initializer);
      if (ts.isNewExpression(init)) {
        const cls = init.expression.getText(sf);
        if (COLLECTIONS.has(cls)) {
          if (mutated.has(name)) sites.push({ file, line, name, kind: 'mutated-collection' });
        } else if (!IMMUTABLE_CLASSES.has(cls)) sites.push({ file, line, name, kind: 'instance' });
      } else if ((ts.isArrayLiteralExpression(init) || ts.isObjectLiteralExpression(init)) && mutated.has(name)) {
        sites.push({ file, line, name, kind: 'mutated-literal' });
      } else if (ts.isCallExpression(init) && init.expression.getText(sf) !== 'Object.freeze') {
        const callee = unwrap(init.expression);
        const called = ts.isPropertyAccessExpression(callee) ? callee.name.text : callee.getText(sf);
        if (mutated.has(name) || (FACTORY.test(called) && !STATELESS_FACTORIES.has(called)))
          sites.push({ file, line, name, kind: 'call-result' });
      }
    }
  }
  return sites;
}

function functionName(node: ts.FunctionLikeDeclaration, sf: ts.SourceFile): string {
  if (node.name !== undefined) {
    const own = node.name.getText(sf);
    const cls = node.parent;
    if ((ts.isClassDeclaration(cls) || ts.isClassExpression(cls)) && cls.name !== undefined)
      return `${cls.name.text}.${own}`;
    return own;
  }
  if (ts.isConstructorDeclaration(node))
    return `${(node.parent as ts.ClassDeclaration).name?.text ?? 'class'}.constructor`;
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent))
    return parent.name.getText(sf);
  if (ts.isCallExpression(parent)) {
    const callee = parent.expression.getText(sf);
    return `<callback of ${callee.length > 40 ? `${callee.slice(0, 40)}…` : callee}>`;
  }
  return '<anonymous>';
}

/** Lines (1-based) of a file's text on which a token other than a comment starts or continues. */
function codeLineSet(sf: ts.SourceFile): Set<number> {
  const lines = new Set<number>();
  // Template literals and regular expressions re-scan with the parse tree's help; the leaves are enough.
  const visit = (node: ts.Node): void => {
    if (node.getChildCount(sf) === 0 && node.kind !== ts.SyntaxKind.EndOfFileToken) {
      const first = lineOf(sf, node.getStart(sf));
      const last = lineOf(sf, node.getEnd());
      for (let l = first; l <= last; l++) lines.add(l);
      return;
    }
    node.getChildren(sf).forEach(visit);
  };
  visit(sf);
  return lines;
}

const LONG_MARK = /^\/\/\s*long:\s*(\S.*)$/u;

/** The reason of a `// long:` line comment among the comments directly before `pos`, if any. */
function longReason(text: string, pos: number): string | undefined {
  for (const range of ts.getLeadingCommentRanges(text, pos) ?? []) {
    const match = LONG_MARK.exec(text.slice(range.pos, range.end).trim());
    if (match?.[1] !== undefined) return match[1].trim();
  }
  return undefined;
}

/** The statement or member whose leading comments speak for a function: `export const f = () => …` → the statement. */
function commentAnchor(fn: ts.Node): ts.Node {
  let node = fn;
  for (;;) {
    const parent = node.parent;
    if (
      ts.isVariableDeclaration(parent) ||
      ts.isVariableDeclarationList(parent) ||
      ts.isVariableStatement(parent) ||
      ts.isPropertyAssignment(parent) ||
      ts.isPropertyDeclaration(parent) ||
      ts.isExportAssignment(parent) ||
      ts.isParenthesizedExpression(parent)
    ) {
      node = parent;
      continue;
    }
    return node;
  }
}

/** Every function-like node with a body in one file's text, with its length in lines. */
export function functionLengthsOf(file: string, text: string): FunctionLength[] {
  const sf = parse(file, text);
  const code = codeLineSet(sf);
  const out: FunctionLength[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body !== undefined) {
      const fn = node as ts.FunctionLikeDeclaration;
      const start = lineOf(sf, fn.getStart(sf));
      const end = lineOf(sf, fn.getEnd());
      let codeLines = 0;
      for (let l = start; l <= end; l++) if (code.has(l)) codeLines++;
      const long = longReason(text, commentAnchor(fn).getFullStart());
      out.push({
        file,
        line: start,
        name: functionName(fn, sf),
        lines: end - start + 1,
        codeLines,
        ...(long === undefined ? {} : { long }),
      });
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out;
}

/** Names a file exports itself: its exported declarations and export specifiers (not `export *`). */
function ownExportNames(sf: ts.SourceFile): Set<string> {
  const names = new Set<string>();
  for (const stmt of sf.statements) {
    if (ts.isExportDeclaration(stmt)) {
      const clause = stmt.exportClause;
      if (clause !== undefined && ts.isNamedExports(clause)) for (const el of clause.elements) names.add(el.name.text);
      else if (clause !== undefined) names.add(clause.name.getText(sf));
    } else if (ts.isExportAssignment(stmt)) names.add('default');
    else if (ts.canHaveModifiers(stmt) && ts.getModifiers(stmt)?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword)) {
      if (ts.isVariableStatement(stmt))
        for (const d of stmt.declarationList.declarations) names.add(d.name.getText(sf));
      else if ('name' in stmt && stmt.name !== undefined) names.add((stmt.name as ts.Identifier).text);
    }
  }
  return names;
}

/**
 * The runtime (value) names a module exports, resolved through re-exports; type-only exports (`export
 * type { … }`, `export type * from …`, interfaces, type aliases) excluded.
 */
export function valueExportsOf(program: ts.Program, file: string, memo = new Map<string, Set<string>>()): string[] {
  return [...valueExportSet(program, file, memo)].sort();
}

function valueExportSet(program: ts.Program, file: string, memo: Map<string, Set<string>>): Set<string> {
  const known = memo.get(file);
  if (known !== undefined) return known;
  const names = new Set<string>();
  memo.set(file, names);
  const checker = program.getTypeChecker();
  const sf = program.getSourceFile(file);
  if (sf === undefined) throw new Error(`code-counts: ${file} is not in the program`);
  const moduleSymbol = checker.getSymbolAtLocation(sf);
  if (moduleSymbol === undefined) return names;
  // `export * from` (not `export type *`): what those modules export as values, this one does too.
  const fromStars = new Set<string>();
  for (const stmt of sf.statements) {
    if (!ts.isExportDeclaration(stmt) || stmt.exportClause !== undefined || stmt.isTypeOnly) continue;
    if (stmt.moduleSpecifier === undefined) continue;
    const target = checker.getSymbolAtLocation(stmt.moduleSpecifier)?.valueDeclaration;
    if (target !== undefined && ts.isSourceFile(target))
      for (const n of valueExportSet(program, target.fileName, memo)) fromStars.add(n);
  }
  const own = ownExportNames(sf);
  // The checker knows which aliases were exported with `export type` (it reports their use as a value);
  // that lookup is not in the public typings, so it is reached through a narrow cast.
  const typeOnly = (checker as unknown as { getTypeOnlyAliasDeclaration?: (s: ts.Symbol) => ts.Node | undefined })
    .getTypeOnlyAliasDeclaration;
  for (const symbol of checker.getExportsOfModule(moduleSymbol)) {
    if (!own.has(symbol.name)) {
      if (fromStars.has(symbol.name)) names.add(symbol.name);
      continue;
    }
    const isAlias = (symbol.flags & ts.SymbolFlags.Alias) !== 0;
    if (isAlias && typeOnly?.call(checker, symbol) !== undefined) continue;
    const target = isAlias ? checker.getAliasedSymbol(symbol) : symbol;
    if ((target.flags & ts.SymbolFlags.Value) !== 0) names.add(symbol.name);
  }
  return names;
}

/** Lines (all lines, blank and comment included) of the .ts files under a directory. */
export function linesUnder(root: string, dir: string): number {
  return tsFiles(root, dir).reduce((sum, f) => sum + readFileSync(join(root, f), 'utf8').split('\n').length - 1, 0);
}

export function tsFiles(root: string, dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(join(root, dir))) {
    const rel = `${dir}/${name}`;
    if (statSync(join(root, rel)).isDirectory()) out.push(...tsFiles(root, rel));
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(rel);
  }
  return out.sort();
}

/** package.json `exports` → the source file each subpath is built from. */
export function entryPoints(root: string): Record<string, string> {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
    exports: Record<string, string | { default: string }>;
  };
  const out: Record<string, string> = {};
  for (const [subpath, target] of Object.entries(pkg.exports)) {
    const built = typeof target === 'string' ? target : target.default;
    if (!built.endsWith('.js')) continue;
    out[subpath] = built.replace(/^\.\/dist\//, '').replace(/\.js$/, '.ts');
  }
  return out;
}

export interface Counts {
  readonly mutableSites: {
    readonly allowed: MutableSite[];
    readonly outside: MutableSite[];
    /** Allow-list entries that name no site (moved or removed: update the list). */
    readonly stale: string[];
  };
  readonly valueExports: Record<string, number>;
  readonly lines: Record<string, number>;
  readonly longest: FunctionLength[];
  /** Functions over MAX_FUNCTION_LINES lines of code without a `// long:` comment. */
  readonly longWithoutReason: FunctionLength[];
  /** Functions over MAX_FUNCTION_LINES lines of code with a `// long:` comment. */
  readonly longWithReason: FunctionLength[];
  /** Operator files over MAX_OPERATOR_FILE_LINES lines without a `// long:` comment before their first statement. */
  readonly longOperatorFiles: { readonly file: string; readonly lines: number }[];
}

/** Whether an operator file's text is over the limit without a `// long:` comment in its header. */
export function operatorFileTooLong(text: string): boolean {
  if (text.split('\n').length - 1 <= MAX_OPERATOR_FILE_LINES) return false;
  const sf = parse('operator.ts', text);
  const first = sf.statements[0];
  return longReason(text, first === undefined ? 0 : first.getFullStart()) === undefined;
}

export function countCode(root: string, top = 15): Counts {
  const dirs = ['src', 'operators', 'adapters'];
  const files = dirs.flatMap((d) => tsFiles(root, d));
  const sites = files.flatMap((f) => mutableSitesOf(f, readFileSync(join(root, f), 'utf8')));
  const allowed = sites.filter((s) => ALLOWED[`${s.file}:${s.name}`] !== undefined);
  const outside = sites.filter((s) => ALLOWED[`${s.file}:${s.name}`] === undefined);
  const stale = Object.keys(ALLOWED).filter((key) => !sites.some((s) => `${s.file}:${s.name}` === key));
  const entries = entryPoints(root);
  const config = ts.getParsedCommandLineOfConfigFile(
    join(root, 'tsconfig.json'),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
      },
    },
  );
  if (config === undefined) throw new Error('code-counts: tsconfig.json could not be read');
  const program = ts.createProgram(
    Object.values(entries).map((f) => join(root, f)),
    config.options,
  );
  const valueExports: Record<string, number> = {};
  const memo = new Map<string, Set<string>>();
  for (const [subpath, file] of Object.entries(entries))
    valueExports[subpath] = valueExportsOf(program, join(root, file), memo).length;
  const lines: Record<string, number> = {};
  for (const d of dirs) lines[d] = linesUnder(root, d);
  lines['total'] = dirs.reduce((s, d) => s + (lines[d] ?? 0), 0);
  const functions = files
    .flatMap((f) => functionLengthsOf(f, readFileSync(join(root, f), 'utf8')))
    .sort((a, b) => b.codeLines - a.codeLines || b.lines - a.lines || a.file.localeCompare(b.file) || a.line - b.line);
  const long = functions.filter((f) => f.codeLines > MAX_FUNCTION_LINES);
  const longOperatorFiles = tsFiles(root, 'operators')
    .map((file) => ({ file, text: readFileSync(join(root, file), 'utf8') }))
    .filter(({ text }) => operatorFileTooLong(text))
    .map(({ file, text }) => ({ file, lines: text.split('\n').length - 1 }));
  return {
    mutableSites: { allowed, outside, stale },
    valueExports,
    lines,
    longest: functions.slice(0, top),
    longWithoutReason: long.filter((f) => f.long === undefined),
    longWithReason: long.filter((f) => f.long !== undefined),
    longOperatorFiles,
  };
}

function render(c: Counts): string {
  const site = (s: MutableSite): string => `  ${s.file}:${s.line} ${s.name} (${s.kind})`;
  const out: string[] = [];
  out.push(
    `module-level mutable sites: ${c.mutableSites.outside.length} outside the allow-list, ${c.mutableSites.allowed.length} allowed`,
  );
  for (const s of c.mutableSites.allowed) out.push(`${site(s)} — allowed: ${ALLOWED[`${s.file}:${s.name}`]}`);
  for (const s of c.mutableSites.outside) out.push(site(s));
  for (const key of c.mutableSites.stale) out.push(`  allow-list entry ${key} names no site: update the list`);
  out.push('runtime names exported per entry point:');
  let sum = 0;
  for (const [subpath, n] of Object.entries(c.valueExports)) {
    out.push(`  ${subpath.padEnd(28)} ${n}${subpath === '.' ? ` (at most ${MAX_MAIN_ENTRY_NAMES})` : ''}`);
    sum += n;
  }
  out.push(`  ${'all entry points'.padEnd(28)} ${sum}`);
  out.push('lines:');
  for (const [dir, n] of Object.entries(c.lines)) out.push(`  ${dir.padEnd(10)} ${n}`);
  out.push(`${c.longest.length} longest functions (lines of code, lines spanned):`);
  for (const f of c.longest)
    out.push(`  ${String(f.codeLines).padStart(4)} ${String(f.lines).padStart(4)}  ${f.name}  ${f.file}:${f.line}`);
  out.push(
    `functions over ${MAX_FUNCTION_LINES} lines of code: ${c.longWithoutReason.length} without a \`// long:\` reason, ${c.longWithReason.length} with one`,
  );
  for (const f of c.longWithoutReason) out.push(`  ${String(f.codeLines).padStart(4)}  ${f.name}  ${f.file}:${f.line}`);
  for (const f of c.longWithReason)
    out.push(`  ${String(f.codeLines).padStart(4)}  ${f.name}  ${f.file}:${f.line} — long: ${f.long}`);
  out.push(
    `operator files over ${MAX_OPERATOR_FILE_LINES} lines without a \`// long:\` reason: ${c.longOperatorFiles.length}`,
  );
  for (const f of c.longOperatorFiles) out.push(`  ${String(f.lines).padStart(4)}  ${f.file}`);
  return out.join('\n');
}

const invoked = process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url);
if (invoked) {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
  const counts = countCode(root);
  process.stdout.write(
    process.argv.includes('--json') ? `${JSON.stringify(counts, null, 2)}\n` : `${render(counts)}\n`,
  );
}
