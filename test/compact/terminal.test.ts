import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { compactTerminal, readTerminalContent, type CompactTerminalOptions } from '../../src/compact/index.js';
import { splitLines } from '../../src/compact/lines.js';
import { codePoints } from '../../src/measure/index.js';
import { LISTING_MAX_CHARS } from '../../src/compact/listing.js';
import { commandWords, detectFamily, familyOfCommand, isFileRead } from '../../src/tools/family.js';

const dir = join(dirname(fileURLToPath(import.meta.url)), '../fixtures/terminal');
const fixture = (name: string): string => readFileSync(join(dir, name), 'utf8');
const render = (name: string, command: string, exitCode?: number, options: CompactTerminalOptions = {}) => {
  const output = fixture(name);
  const r = compactTerminal(exitCode === undefined ? { command, output } : { command, output, exitCode }, options);
  expect(codePoints(r.text)).toBeLessThan(codePoints(output));
  return { ...r, output, lines: splitLines(r.text) };
};

describe('built-in terminal compactors on real captured outputs', () => {
  it('git status: hints dropped, every path kept, grouped by section and directory', () => {
    const r = render('git-status.txt', 'git status');
    expect(r.family).toBe('git-status');
    expect(r.text).not.toContain('(use "git');
    expect(r.text).toContain('On branch main');
    expect(r.text).toContain('Changes not staged for commit: modified (28):');
    expect(r.text).toContain('Changes to be committed: deleted (1):');
    for (const m of r.output.matchAll(/^\t(?:[a-z ]+:\s+)?(\S+)$/gm)) {
      expect(r.text).toContain(m[1]!.split('/').pop()!);
    }
  });

  it('git diff: every file and hunk header kept in order, changed runs factored', () => {
    const r = render('git-diff.txt', 'git diff --no-color', 0);
    expect(r.family).toBe('git-diff');
    expect(r.lines[0]).toBe('[exit code: 0]');
    expect(r.lines[1]).toBe('[diff: 28 files, +55 -55]');
    const headers = (lines: readonly string[]) =>
      lines.filter((l) => /^(diff --git|index |--- a|\+\+\+ b|@@ )/.test(l));
    expect(headers(r.lines)).toEqual(headers(splitLines(r.output)));
    expect(r.text).toContain('\u2026 \u00d78 more lines of the form "-line {11..18}" \u2026');
  });

  it('git log: one line per commit with short hash and subject', () => {
    const r = render('git-log.txt', 'git log');
    expect(r.family).toBe('git-log');
    const hashes = [...r.output.matchAll(/^commit ([0-9a-f]{40})/gm)].map((m) => m[1]!);
    expect(hashes).toHaveLength(46);
    expect(r.lines).toHaveLength(46);
    hashes.forEach((h, i) => expect(r.lines[i]!.startsWith(h.slice(0, 9))).toBe(true));
    expect(r.text).toContain('Tester: Tweak module 6 for issue #145');
    expect(r.text).not.toContain('Author:');
  });

  it('vitest: passing lines dropped, failures, assertion excerpts and summary kept', () => {
    const r = render('vitest-fail.txt', 'npx vitest run', 1);
    expect(r.family).toBe('vitest');
    expect(r.text).not.toMatch(/^ ✓ /m);
    expect(r.text).toContain('[vitest: 192 passing/progress lines dropped]');
    for (const n of [4, 8, 12]) {
      expect(r.text).toContain(` FAIL  test/m${n}.test.js > module ${n} > handles edge ${n}`);
      expect(r.text).toContain(
        `AssertionError: expected { a: ${n}, b: [ 1, 2 ] } to deeply equal { a: ${n}, b: [ 1, 3 ] }`,
      );
    }
    expect(r.text).toContain('      Tests  3 failed | 192 passed (195)');
    expect(r.text).toContain(' Test Files  3 failed | 9 passed (12)');
    expect(r.lines[0]).toBe('[exit code: 1]');
  });

  it('pytest: PASSED lines dropped, tracebacks, E lines and summaries kept', () => {
    const r = render('pytest-fail.txt', 'python3 -m pytest -v tests');
    expect(r.family).toBe('pytest');
    expect(r.text).not.toContain(' PASSED ');
    for (const line of splitLines(r.output).filter(
      (l) => /^(FAILED |E\s|=+ \d+ failed)/.test(l) || l.endsWith(' FAILED'),
    )) {
      expect(r.text).toContain(line);
    }
    expect(r.text).toContain('======================== 4 failed, 172 passed in 1.05s =========================');
  });

  it('cargo test: ok lines and Compiling dropped; panics, failures and test result kept', () => {
    const r = render('cargo-test-fail.txt', 'cargo test');
    expect(r.family).toBe('cargo-test');
    expect(r.text).not.toMatch(/ \.\.\. ok$/m);
    expect(r.text).not.toContain('Compiling adder');
    for (const name of ['panics_here', 'wrong_31', 'wrong_32'])
      expect(r.text).toContain(`test tests::${name} ... FAILED`);
    expect(r.text).toContain("thread 'tests::panics_here' (7986) panicked at src/lib.rs:16:70:");
    expect(r.text).toContain('index out of bounds: the len is 0 but the index is 3');
    expect(r.text).toContain(
      'test result: FAILED. 30 passed; 3 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.26s',
    );
  });

  // With the diagnostic budget off (diagnosticChars: 0), compiler output is grouped; the faithful
  // views of the same outputs are tested in faithful-views.test.ts.
  it('tsc, budget off: grouped by code and by file, every (file, code, position) kept', () => {
    const r = render('tsc-errors.txt', 'npx tsc -p . --pretty false', undefined, { diagnosticChars: 0 });
    expect(r.family).toBe('diagnostics');
    expect(r.lines[0]).toBe('[diagnostics: 56 errors, 0 other in 14 files]');
    expect(r.text).toContain("TS2304 \u00d714: Cannot find name 'undefinedThing{1..14}'. \u00d714");
    for (const m of r.output.matchAll(/^(\S+)\((\d+),(\d+)\): error (TS\d+)/gm)) {
      const line = r.lines.find((l) => l.startsWith(`  ${m[1]}: `));
      expect(line).toBeDefined();
      expect(line).toContain(m[4]!);
      expect(line).toContain(`${m[2]}:${m[3]}`);
    }
  });

  it('javac, budget off: grouped by message kind and file, the error count kept', () => {
    const r = render('javac-errors.txt', 'javac -d out src/app/*.java', 1, { diagnosticChars: 0 });
    expect(r.family).toBe('diagnostics');
    expect(r.text).toContain('[diagnostics: 50 errors, 0 other in 10 files]');
    expect(r.text).toContain('cannot find symbol (class Undefined{1..10}) \u00d720');
    expect(r.text).toContain('incompatible types: String cannot be converted to int');
    expect(r.lines.at(-1)).toBe('50 errors');
    for (let i = 1; i <= 10; i += 1) expect(r.text).toContain(`src/app/C${i}.java: `);
  });

  it('mvn: every [ERROR] line and the build result kept', () => {
    const output = fixture('mvn-offline-fail.txt');
    const r = compactTerminal({ command: 'mvn -o -B compile', output, exitCode: 1 }, { maxChars: 2000 });
    expect(['maven', 'generic']).toContain(r.family); // nothing is maven noise here: the generic fallback takes it
    expect(codePoints(r.text)).toBeLessThan(codePoints(output));
    expect(r.text).toContain('[INFO] BUILD FAILURE');
    for (const l of splitLines(output).filter((x) => x.startsWith('[ERROR] ') && x.length > 9))
      expect(r.text).toContain(l);
  });

  it('grep: match lines verbatim, the first ones of every file, exact counts', () => {
    const r = render('grep-rn.txt', 'grep -rn subscriber src/internal/operators');
    expect(r.family).toBe('grep');
    const counts = new Map<string, number>();
    for (const l of splitLines(r.output)) {
      const file = l.slice(0, l.indexOf(':'));
      counts.set(file, (counts.get(file) ?? 0) + 1);
    }
    expect(r.lines[0]).toBe(`[matches: 334 in ${counts.size} files]`);
    // Shown lines plus "+k more" add up to each file's count; files without a shown line are named with theirs.
    for (const [file, n] of counts) {
      const shown = r.lines.filter((l) => l.startsWith(`${file}:`)).length;
      const at = r.lines.findLastIndex((l) => l.startsWith(`${file}:`));
      const more = /^ {2}… \+(\d+) more in this file$/.exec(r.lines[at + 1] ?? '');
      if (shown > 0) expect(shown + Number(more?.[1] ?? 0)).toBe(n);
      else expect(r.text).toContain(`${file} (${n})`);
    }
  });

  it('find / ls -R / ls -la: grouped by directory, counts add up', () => {
    const find = render('find.txt', 'find src -type f');
    expect(find.family).toBe('listing');
    const total = find.lines.reduce((n, l) => n + Number(/ \((\d+)\): /.exec(l)?.[1] ?? 1), 0);
    expect(total).toBe(splitLines(find.output).length);
    const lsr = render('ls-r.txt', 'ls -R');
    expect(lsr.text).toContain('./internal/operators/ (');
    const lsl = render('ls-la.txt', 'ls -la');
    expect(lsl.text).toMatch(/^dirs \(\d+\): \.bin\/ /m);
    expect(lsl.text).toContain('total 624');
  });

  it('ls -R: a subdirectory is named once (by its own line), every file counted', () => {
    const output = ['.:', 'README.md', 'src', '', './src:', 'a.ts', 'b.ts', 'lib', '', './src/lib:', 'c.ts', ''].join(
      '\n',
    );
    const text = compactTerminal({ command: 'ls -R', output }).text;
    expect(text.split('\n')).toEqual([
      './ (1 + 1 dir): README.md',
      './src/ (2 + 1 dir): a.ts b.ts',
      './src/lib/ (1): c.ts',
    ]);
  });

  it('a large listing is fitted to LISTING_MAX_CHARS: every directory keeps its line and its exact count', () => {
    const paths = Array.from(
      { length: 3000 },
      (_, i) => `src/test/java/com/acme/module${i % 60}/SomeRatherLongTestClassName${i}Test.java`,
    );
    const text = compactTerminal({ command: 'find src -name "*.java"', output: paths.join('\n') }).text;
    expect(codePoints(text)).toBeLessThanOrEqual(LISTING_MAX_CHARS);
    const [root, ...lines] = text.split('\n');
    expect(root).toBe('[directories below are relative to src/test/java/com/acme/]');
    expect(lines).toHaveLength(60);
    for (const l of lines) expect(l).toMatch(/^module\d+\/ \(50\): (\S+\.java ){3,}…\(\+\d+ more\)$/);
  });

  it('a listing of a deep tree says its root once; a line the host cut keeps its own path', () => {
    const root = '/workspace/project__name__1.0';
    const dirs = Array.from({ length: 8 }, (_, i) => `${root}/pkg/mod${i}`);
    const block = (d: string, i: number): string[] => [`${d}:`, `a${i}.py  b${i}.py  c${i}.py  d${i}.py`, ''];
    const output = [
      ...[root, ...dirs].flatMap(block),
      'ct__name__1.0/pkg/cut:', // the start of this header was cut by the host
      'e.py',
    ].join('\n');
    const text = compactTerminal({ command: `ls -R ${root}`, output }).text;
    const lines = text.split('\n');
    expect(lines[0]).toBe(`[directories below are relative to ${root}/]`);
    expect(lines[1]).toBe('./ (4): a0.py b0.py c0.py d0.py');
    expect(lines).toContain('pkg/mod7/ (4): a8.py b8.py c8.py d8.py');
    expect(lines.at(-1)).toBe('ct__name__1.0/pkg/cut/ (1): e.py');
    expect(text.split(root)).toHaveLength(2); // said once
    // Every file name is still in the view.
    for (let i = 0; i <= 8; i++) expect(text).toContain(`d${i}.py`);
  });

  it('a listing whose directories share no long root is written as it was', () => {
    const output = ['.:', 'README.md', 'src', '', './src:', 'a.ts', 'lib', '', './src/lib:', 'c.ts', ''].join('\n');
    expect(compactTerminal({ command: 'ls -R', output }).text).not.toContain('relative to');
  });

  it('isFileRead: plain reads of files, not filters, writes or bare commands', () => {
    for (const c of [
      'cat a.py',
      'cat -n src/a.py b.py',
      'head -n 50 log.txt',
      'tail -100 out.log',
      "sed -n '10,40p' a.py",
      'sed -n 5p a.py',
      'nl -ba a.py',
      'cd /repo && cat a.py',
      'cat a.py 2>/dev/null',
    ])
      expect(isFileRead(c), c).toBe(true);
    for (const c of [
      'cat a.py | grep x',
      'cat > a.py',
      'cat <<EOF > a.py',
      'sed -i s/a/b/ a.py',
      'tail -f',
      'cat',
      'grep -n x a.py',
      'python a.py',
    ])
      expect(isFileRead(c), c).toBe(false);
  });

  it('npm install: fetch chatter dropped, summary and errors kept', () => {
    const ok = render('npm-install.txt', 'npm install commander zod');
    expect(ok.family).toBe('install');
    expect(ok.text).toContain('added 16 packages in 5s');
    expect(ok.text).not.toContain('npm http');
    const fail = render('npm-install-fail.txt', 'npm install vitest', 1);
    expect(fail.text).toContain('npm error code ENOTCACHED');
    expect(fail.lines[0]).toBe('[exit code: 1]');
  });

  it('generic fallback: head, tail and numbers-only runs; error lines kept', () => {
    const r = render('python-importtime.txt', 'python3 -X importtime -c "import asyncio"');
    expect(r.family).toBe('generic');
    const src = splitLines(r.output);
    expect(r.lines[0]).toBe(src[0]);
    expect(r.lines.at(-1)).toBe(src.at(-1));
    const ls = render('npm-ls.txt', 'npm ls --all');
    expect(ls.text).toMatch(/… \d+ lines omitted …/);
  });
  it('eslint (stylish), budget off: grouped by rule and by file, every (file, rule, position) and the summary kept', () => {
    const r = render('eslint-fail.txt', 'npx eslint .', 1, { diagnosticChars: 0 });
    expect(r.family).toBe('diagnostics');
    expect(r.lines[0]).toBe('[exit code: 1]');
    expect(r.lines[1]).toBe('[diagnostics: 72 errors, 8 other in 8 files]');
    expect(r.text).toContain(
      "no-undef \u00d716: 'totl' is not defined \u00d78 | 'missing{1..8}' is not defined \u00d78",
    );
    expect(r.text).toContain('\u2716 80 problems (72 errors, 8 warnings)');
    let file = '';
    let rows = 0;
    for (const l of splitLines(r.output)) {
      if (l.startsWith('/')) file = l;
      const m = /^\s+(\d+:\d+)\s+(?:error|warning)\s+.*?\s{2,}(\S+)$/.exec(l);
      if (m === null) continue;
      rows += 1;
      const line = r.lines.find((x) => x.startsWith(`  ${file}: `));
      expect(line).toBeDefined();
      expect(line).toMatch(new RegExp(`${m[2]!} [\\d:,]*\\b${m[1]!}\\b`));
    }
    expect(rows).toBe(80);
  });

  it('go test -v: RUN/PASS lines dropped; failures, panic, t.Errorf lines and package results kept', () => {
    const r = render('go-test-fail.txt', 'go test -v ./...', 1);
    expect(r.family).toBe('go-test');
    expect(r.lines[0]).toBe('[exit code: 1]');
    expect(r.text).toContain('[go: 104 passing/progress lines dropped]');
    expect(r.text).not.toMatch(/^(=== RUN|--- PASS)/m);
    const kept = splitLines(r.output).filter((l) =>
      /^(--- FAIL: |panic: |\s+\w+_test\.go:\d+: |ok {2}\t|FAIL\t)/.test(l),
    );
    expect(kept).toHaveLength(9);
    for (const l of kept) expect(r.lines).toContain(l);
    expect(r.text).toContain('    calc_test.go:133: Mul(3, 2) = 7, want 6');
    expect(r.text).toContain('FAIL\texample.com/capdemo/strs\t0.005s');
  });

  it('tree -L 3: regrouped by directory, every leaf counted, the summary kept', () => {
    const r = render('tree.txt', 'tree -L 3 src', 0);
    expect(r.family).toBe('listing');
    expect(r.text).toContain('16 directories, 256 files');
    expect(r.text).toContain('internal/scheduled/ (7): scheduleArray.ts ');
    const entries = splitLines(r.output).flatMap((l) => {
      const m = /^((?:\u2502\u00a0\u00a0 |\u2502 {3}| {4})*)[\u251c\u2514]\u2500\u2500 (.+)$/u.exec(l);
      return m === null ? [] : [{ depth: m[1]!.length / 4, name: m[2]! }];
    });
    const leaves = entries.filter((e, i) => (entries[i + 1]?.depth ?? -1) <= e.depth);
    expect(leaves.length).toBeGreaterThan(250);
    const counted = r.lines.reduce((n, l) => {
      if (l.startsWith('[') || l === 'src' || /^\d+ directories/.test(l)) return n;
      return n + Number(/ \((\d+)\): /.exec(l)?.[1] ?? 1);
    }, 0);
    expect(counted).toBe(leaves.length);
    const tokens = new Set(r.text.split(/[\s/]+/));
    const missing = leaves.filter((e) => !tokens.has(e.name)).length;
    const truncated = [...r.text.matchAll(/\u2026\(\+(\d+) more\)/g)].reduce((n, m) => n + Number(m[1]), 0);
    expect(missing).toBeLessThanOrEqual(truncated);
  });

  it('rg -n: the first match of every file verbatim when the budget allows, exact counts', () => {
    const r = render('rg-n.txt', 'rg -n "OperatorFunction<" src', 0);
    expect(r.family).toBe('grep');
    const byFile = new Map<string, string[]>();
    for (const l of splitLines(r.output)) {
      const m = /^([^:]+):(\d+):(.*)$/.exec(l)!;
      byFile.set(m[1]!, [...(byFile.get(m[1]!) ?? []), l]);
    }
    expect(r.lines[1]).toBe(`[matches: 319 in ${byFile.size} files]`);
    const wide = compactTerminal(
      { command: 'rg -n "OperatorFunction<" src', output: r.output, exitCode: 0 },
      { maxChars: 20000 },
    );
    expect(codePoints(wide.text)).toBeLessThan(codePoints(r.output));
    const lines = new Set(splitLines(wide.text));
    for (const list of byFile.values()) expect(lines).toContain(list[0]!);
  });
});

describe('hand-written sample for a tool not installed here (gradle)', () => {
  it('gradle drops up-to-date tasks and keeps failures', () => {
    const lines = Array.from({ length: 40 }, (_, i) => `> Task :module${i}:compileJava UP-TO-DATE`);
    lines.push(
      '',
      'AppTest > adds() FAILED',
      '    org.opentest4j.AssertionFailedError: expected: <3> but was: <2>',
      '',
      'BUILD FAILED in 3s',
    );
    const r = compactTerminal({ command: './gradlew test', output: lines.join('\n') });
    expect(r.family).toBe('gradle');
    expect(r.text).toContain('AppTest > adds() FAILED');
    expect(r.text).toContain('BUILD FAILED in 3s');
    expect(r.text).not.toContain('UP-TO-DATE');
  });
});

describe('family detection', () => {
  it.each([
    ['git -C repo --no-pager diff HEAD~1', 'git-diff'],
    ['cd app && git status -s', 'git-status'],
    ['rtk git log -5', 'git-log'],
    ['FOO=1 npx vitest run', 'vitest'],
    ['uv run python -m pytest -q', 'pytest'],
    ['python3 -m pytest', 'pytest'],
    ['cargo test --workspace', 'cargo-test'],
    ['/usr/bin/grep -rn x .', 'grep'],
    ['rg foo | head -50', 'grep'],
    ['pnpm install', 'install'],
    ['pip install -r requirements.txt', 'install'],
    ['npx tsc --noEmit', 'diagnostics'],
    ['./mvnw -B test', 'maven'],
    ['make all', 'generic'],
  ])('%s → %s', (command, family) => {
    expect(familyOfCommand(command)).toBe(family);
  });

  it('falls back to the output shape when the command is unknown', () => {
    expect(detectFamily('npm test', fixture('vitest-fail.txt'))).toBe('vitest');
    expect(detectFamily('make check', fixture('pytest-fail.txt'))).toBe('pytest');
    expect(detectFamily(undefined, fixture('git-diff.txt'))).toBe('git-diff');
    expect(commandWords('env A=1 sudo /bin/ls -la')).toEqual(['ls', '-la']);
  });

  it('reads host JSON terminal results (output + exit_code)', () => {
    expect(readTerminalContent(JSON.stringify({ output: 'x\ny', exit_code: 2, error: null }))).toEqual({
      output: 'x\ny',
      exitCode: 2,
    });
    expect(readTerminalContent('{not json}', 1)).toEqual({ output: '{not json}', exitCode: 1 });
  });
});
