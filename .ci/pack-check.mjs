#!/usr/bin/env node
/**
 * What a user gets from `npm install token-terminator`, checked on the packed tarball, offline:
 *
 * 1. the tarball holds LICENSE, README.md and every file the README links to, and every target of
 *    the exports map (types and code);
 * 2. publint and @arethetypeswrong/cli (ESM-only profile) find nothing on the tarball;
 * 3. every ```ts block of README.md and every example compiles with `tsc --strict` in a scratch
 *    project that has the tarball as its `token-terminator` (not ../src);
 * 4. the examples run there, importing the packed package through its exports map.
 *
 * Usage: node .ci/pack-check.mjs [--no-build] [--no-run]   (exit 1 on the first failure)
 */
import { execFileSync, spawn } from 'node:child_process';
import {
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, normalize, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const work = join(root, '.pack-check'); // inside the repo: everything but the package resolves from ../node_modules
const args = new Set(process.argv.slice(2));
const bin = (name) => join(root, 'node_modules', '.bin', name);
let failures = 0;

function step(title) {
  console.log(`-- ${title}`);
}
function fail(message) {
  console.log(`FAIL ${message}`);
  failures += 1;
}
function run(file, argv, options = {}) {
  return execFileSync(file, argv, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], ...options });
}

if (!args.has('--no-build')) {
  step('build');
  run('npm', ['run', 'build', '--silent']);
}
rmSync(work, { recursive: true, force: true });
mkdirSync(join(work, 'node_modules'), { recursive: true });

step('npm pack');
const [packed] = JSON.parse(run('npm', ['pack', '--json', '--pack-destination', work]));
const tarball = join(work, packed.filename);
const files = new Set(packed.files.map((f) => normalize(f.path)));
console.log(`${packed.filename}: ${files.size} files, ${packed.size} bytes`);

step('contents');
const readme = readFileSync(join(root, 'README.md'), 'utf8');
const linked = [...readme.matchAll(/\]\(([^)\s#]+)(?:#[^)]*)?\)/g)]
  .map((m) => m[1])
  .filter((href) => !/^[a-z]+:/i.test(href));
for (const required of ['LICENSE', 'README.md', 'package.json', ...linked]) {
  if (!files.has(normalize(required)))
    fail(`the tarball lacks ${required}${linked.includes(required) ? ' (linked from README.md)' : ''}`);
}
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
for (const [subpath, target] of Object.entries(pkg.exports)) {
  for (const file of typeof target === 'string' ? [target] : Object.values(target)) {
    if (!files.has(normalize(file))) fail(`exports["${subpath}"] points at ${file}, which is not in the tarball`);
  }
}
if (!pkg.license || !pkg.repository) fail('package.json needs license and repository');

step('publint');
try {
  console.log(run(bin('publint'), ['run', tarball, '--strict']).trim());
} catch {
  fail('publint reported problems');
}

step('arethetypeswrong');
try {
  console.log(
    run(bin('attw'), [
      tarball,
      '--profile',
      'esm-only',
      '--no-definitely-typed',
      '--format',
      'table-flipped',
      '--no-emoji',
      '--no-color',
    ]).trim(),
  );
} catch (error) {
  console.log(String(error.stdout ?? ''));
  fail('attw found type resolution problems');
}

step('README snippets and examples against the packed package');
execFileSync('tar', ['-xzf', tarball, '-C', join(work, 'node_modules')]);
renameSync(join(work, 'node_modules', 'package'), join(work, 'node_modules', 'token-terminator'));
writeFileSync(
  join(work, 'package.json'),
  JSON.stringify({ name: 'pack-check', private: true, type: 'module' }, null, 2),
);
const compilerOptions = {
  target: 'ES2022',
  lib: ['ES2023'],
  module: 'NodeNext',
  moduleResolution: 'NodeNext',
  strict: true,
  noUncheckedIndexedAccess: true,
  exactOptionalPropertyTypes: true,
  verbatimModuleSyntax: true,
  isolatedModules: true,
  skipLibCheck: true,
  noEmit: true,
  types: ['node'],
};
writeFileSync(
  join(work, 'tsconfig.json'),
  JSON.stringify({ compilerOptions, include: ['*.ts', 'examples/*.ts'] }, null, 2),
);
const blocks = [...readme.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
if (blocks.length === 0) fail('README.md has no ts blocks');
blocks.forEach((code, i) => writeFileSync(join(work, `readme-${i + 1}.ts`), `${code}export {};\n`));
mkdirSync(join(work, 'examples'));
const examples = readdirSync(join(root, 'examples')).filter((f) => f.endsWith('.ts'));
for (const f of examples) copyFileSync(join(root, 'examples', f), join(work, 'examples', f));
// the examples read their recorded sessions beside them, as they do in a user's clone
cpSync(join(root, 'examples', 'sessions'), join(work, 'examples', 'sessions'), { recursive: true });
try {
  run(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(work, 'tsconfig.json')], {
    cwd: work,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  console.log(
    `${blocks.length} README blocks and ${examples.length} example files compile under tsc --strict against ${packed.filename}`,
  );
} catch {
  fail('README snippets or examples do not compile against the packed package');
}

if (!args.has('--no-run')) {
  step('examples run against the packed package');
  const runnable = examples.filter(
    (f) => !f.endsWith('.test.ts') && readFileSync(join(root, 'examples', f), 'utf8').includes('example:'),
  );
  const results = await Promise.all(
    runnable.map(
      (f) =>
        new Promise((done) => {
          const child = spawn(process.execPath, ['--import', 'tsx', join('examples', f)], {
            cwd: work,
            stdio: ['ignore', 'pipe', 'pipe'],
            env: { ...process.env, NO_COLOR: '1' },
          });
          let out = '';
          child.stdout.on('data', (d) => (out += d));
          child.stderr.on('data', (d) => (out += d));
          child.on('close', (code) => done({ f, code, out }));
        }),
    ),
  );
  for (const r of results) {
    if (r.code === 0) console.log(`${r.f}: ok`);
    else fail(`${r.f} exited ${r.code} against the packed package:\n${r.out}`);
  }
  if (!existsSync(join(work, 'node_modules', 'token-terminator', 'dist', 'src', 'index.js')))
    fail('the extracted package has no dist/src/index.js');
}

rmSync(work, { recursive: true, force: true });
console.log(failures === 0 ? 'package check passed' : `package check: ${failures} failure(s)`);
process.exit(failures === 0 ? 0 : 1);
