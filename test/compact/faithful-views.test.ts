/**
 * Faithful on red (issue 12, Build item 4): on real captured failing outputs, every diagnostic line
 * is in the first view the model gets. The diagnostic lines are picked out of each raw fixture by
 * rules written here, per tool, independently of src/compact/diagnostic-lines.ts, and each one is
 * asserted on its own, so a view that drops one fails. The views are the operator's real output
 * (real vault on a temp file): strictly smaller or unchanged, and the receipt recovers the exact
 * original.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { compressToolResult } from '../../operators/compress-tool-result.js';
import { compactTerminal } from '../../src/compact/index.js';
import { splitLines, stripAnsi } from '../../src/compact/lines.js';
import { codePoints, createTiktokenCounter } from '../../src/measure/index.js';
import { createVault } from '../../src/vault/index.js';
import { FIXTURE_COMMANDS } from '../fixtures/terminal/commands.js';
import { expectRecovers, fixture, result, runOp } from '../operators/tool-helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'tt-faithful-'));
const vault = await createVault({ path: join(dir, 'vault.sqlite3') });
const counter = createTiktokenCounter('o200k_base');
afterAll(async () => {
  await vault.close();
  counter.dispose?.();
  rmSync(dir, { recursive: true, force: true });
});

const lines = (raw: string): string[] => splitLines(stripAnsi(raw));
const matching = (raw: string, ...res: RegExp[]): string[] => lines(raw).filter((l) => res.some((re) => re.test(l)));

/** The line after each line matching `re`. */
const after = (raw: string, re: RegExp): string[] => {
  const ls = lines(raw);
  return ls.flatMap((l, i) => (re.test(l) && ls[i + 1] !== undefined ? [ls[i + 1]!] : []));
};

/** For every exception header, the first stack frame of the project's own code below it. */
const firstProjectFrames = (raw: string, header: RegExp, project: RegExp): string[] => {
  const out: string[] = [];
  let open = false;
  for (const l of lines(raw)) {
    if (header.test(l)) open = true;
    else if (open && project.test(l)) {
      out.push(l);
      open = false;
    }
  }
  return out;
};

/** Python: each traceback's exception line, its last frame and that frame's source line. */
const pythonTracebacks = (raw: string): string[] => {
  const ls = lines(raw);
  const out: string[] = [];
  for (let i = 0; i < ls.length; i += 1) {
    if (ls[i] !== 'Traceback (most recent call last):') continue;
    out.push(ls[i]!);
    let j = i + 1;
    let lastFrame = -1;
    while (j < ls.length && (ls[j]!.startsWith(' ') || ls[j] === '')) {
      if (ls[j]!.startsWith('  File "')) lastFrame = j;
      j += 1;
    }
    if (lastFrame >= 0) out.push(ls[lastFrame]!, ls[lastFrame + 1]!);
    if (j < ls.length) out.push(ls[j]!);
  }
  return out;
};

/** Go: each panic and goroutine header, and the frames (function + file line) of the module's own code. */
const goPanics = (raw: string, module: RegExp): string[] => {
  const ls = lines(raw);
  return ls.flatMap((l, i) => {
    if (/^\s*panic: |^goroutine \d+ \[/.test(l)) return [l];
    if (module.test(l) && /^\t\//.test(ls[i + 1] ?? '')) return [l, ls[i + 1]!];
    return [];
  });
};

// Per fixture: the diagnostic lines, by this file's own rules.
const DIAGNOSTICS: Record<string, (raw: string) => string[]> = {
  'pytest-assert-fail.txt': (raw) =>
    matching(raw, /^E(\s|$)/, /^(FAILED|ERROR) /, /^\S+\.py:\d+: \w*(Error|Exception)$/, /^=+ \d+ failed/),
  'pytest-fail.txt': (raw) =>
    matching(raw, /^E(\s|$)/, /^(FAILED|ERROR) /, /^\S+\.py:\d+: \w*(Error|Exception)$/, /^=+ \d+ failed/),
  'python-traceback.txt': (raw) => [
    ...pythonTracebacks(raw),
    ...matching(raw, /^(During handling of the above exception|The above exception was the direct cause)/),
  ],
  'java-exception.txt': (raw) => [
    ...matching(raw, /^Exception in thread /, /^Caused by: /),
    ...firstProjectFrames(raw, /^(Exception in thread |Caused by: )/, /^\tat com\.acme\./),
  ],
  'mvn-test-fail.txt': (raw) => [
    ...matching(raw, /^\[ERROR\]/, /^Caused by: /, /BUILD FAILURE/),
    ...after(raw, /<<< (FAILURE|ERROR)!$/),
    ...firstProjectFrames(raw, /<<< (FAILURE|ERROR)!$|^Caused by: /, /^\tat com\.acme\./),
  ],
  'mvn-offline-fail.txt': (raw) => matching(raw, /^\[ERROR\]/, /BUILD FAILURE/),
  'tsc-errors.txt': (raw) => matching(raw, /\(\d+,\d+\): error TS\d+: /),
  'javac-errors.txt': (raw) => matching(raw, /\.java:\d+: error: /, /^\d+ errors$/),
  'eslint-fail.txt': (raw) => {
    const ls = lines(raw);
    return ls.flatMap((l, i) => {
      if (/^\s+\d+:\d+\s+error\s/.test(l)) return [l];
      if (l.startsWith('/') && /^\s+\d+:\d+\s+error\s/.test(ls[i + 1] ?? '')) return [l];
      return /problems? \(\d+ errors?/.test(l) ? [l] : [];
    });
  },
  'go-vet.txt': (raw) => matching(raw, /^\S+\.go:\d+:\d+: /),
  'cargo-build-errors.txt': (raw) => matching(raw, /^error(\[E\d+\])?: /, /^\s+--> /),
  'npm-install-fail.txt': (raw) => matching(raw, /^npm (ERR!|error) /),
  'go-panic.txt': (raw) => [...goPanics(raw, /^(main\.|example\.com\/)/), ...matching(raw, /^exit status \d+$/)],
  'go-test-fail.txt': (raw) => [
    ...goPanics(raw, /^example\.com\//),
    ...matching(raw, /^--- FAIL: /, /^\s+\w+_test\.go:\d+: /, /^FAIL\b/),
  ],
  'cargo-test-fail.txt': (raw) => [
    ...matching(raw, /panicked at /, /^test .* \.\.\. FAILED$/, /^test result: FAILED/, /^\s*(left|right): /),
    ...after(raw, /panicked at /),
  ],
  'vitest-fail.txt': (raw) =>
    matching(
      raw,
      /^\s*×\s/,
      /^\s*→ /,
      /^\s*FAIL\s/,
      /^AssertionError/,
      /^\s*❯ test\/\S+:\d+:\d+/,
      /^\s*Tests\s+\d+ failed/,
      /^\s*Test Files\s+\d+ failed/,
    ),
};

async function view(name: string): Promise<{ raw: string; out: string }> {
  const raw = fixture(name);
  const spec = FIXTURE_COMMANDS[name]!;
  const [step] = await runOp(
    compressToolResult({ vault, counter }),
    [result('terminal', raw, { command: spec.command }, spec.exitCode)],
    { sessionId: `faithful-${name}` },
  );
  return { raw, out: step!.value.content };
}

describe('faithful on red: every diagnostic line of a real failing output is in its first view', () => {
  for (const name of Object.keys(DIAGNOSTICS)) {
    it(name, async () => {
      const { raw, out } = await view(name);
      const expected = DIAGNOSTICS[name]!(raw);
      expect(expected.length).toBeGreaterThan(0);
      if (out === raw) return; // passed through unchanged: every line is there
      expect(codePoints(out)).toBeLessThan(codePoints(raw));
      await expectRecovers(vault, out, raw);
      const shown = new Set(splitLines(out));
      for (const line of expected) expect(shown, `missing from the view of ${name}: ${line}`).toContain(line);
    });
  }

  it('still shrinks most of these failing outputs (faithful does not mean pass-through)', async () => {
    const shrunk: string[] = [];
    for (const name of Object.keys(DIAGNOSTICS)) {
      const { raw, out } = await view(name);
      if (out !== raw) shrunk.push(name);
    }
    expect(shrunk.length).toBeGreaterThanOrEqual(Object.keys(DIAGNOSTICS).length - 4);
  });

  it('elides library frames of a stack in runs, keeping its project frames', async () => {
    const { raw, out } = await view('cargo-test-fail.txt');
    const shown = splitLines(out);
    expect(lines(raw).filter((l) => l.includes(' at /rustc/')).length).toBeGreaterThan(10);
    expect(shown.some((l) => l.includes(' at /rustc/'))).toBe(false);
    expect(shown).toContain('             at ./src/lib.rs:16:70');
    expect(shown.some((l) => /^… \d+ stack frame lines omitted …$/.test(l))).toBe(true);
  });

  it('a non-zero exit status is the first line of the view', async () => {
    const { out } = await view('python-traceback.txt');
    expect(splitLines(out)[0]).toBe('[exit code: 1]');
  });

  it('the shape decides when no command is known (a script, `make check`, a `process` result)', async () => {
    for (const name of ['pytest-assert-fail.txt', 'mvn-test-fail.txt', 'python-traceback.txt', 'go-panic.txt']) {
      const raw = fixture(name);
      const r = compactTerminal({ output: raw });
      const shown = new Set(splitLines(r.text));
      for (const line of DIAGNOSTICS[name]!(raw)) expect(shown, `${name}: ${line}`).toContain(line);
      const [native] = await runOp(
        compressToolResult({ vault, counter, nativeMinChars: 1000 }),
        [result('process', raw)],
        { sessionId: 'process' },
      );
      const nativeShown = new Set(splitLines(native!.value.content));
      if (native!.value.content !== raw)
        for (const line of DIAGNOSTICS[name]!(raw)) expect(nativeShown, `process ${name}: ${line}`).toContain(line);
    }
  });

  it('the reference-compatible mode keeps the diagnostic lines its head/tail cut would drop', async () => {
    const raw = fixture('pytest-assert-fail.txt');
    const [out] = await runOp(
      compressToolResult({ vault, counter, nativeMinChars: 1000, nativeMaxChars: 2000, nativeStrategy: 'reference' }),
      [result('process', raw)],
      { sessionId: 'ref' },
    );
    expect(out!.value.content).not.toBe(raw);
    const shown = new Set(splitLines(out!.value.content));
    for (const line of DIAGNOSTICS['pytest-assert-fail.txt']!(raw)) expect(shown, line).toContain(line);
    await expectRecovers(vault, out!.value.content, raw);
  });

  it('a passing run still shrinks to its summary', async () => {
    const raw = fixture('pytest-assert-fail.txt');
    // The same run with its failures removed: only PASSED lines, the header and a green summary.
    const green = lines(raw)
      .filter((l) => / PASSED/.test(l) || /^(platform|rootdir|plugins|collected|=+ test session starts)/.test(l))
      .concat(['======================== 112 passed in 4.52s =========================='])
      .join('\n');
    const r = compactTerminal({ command: 'python3 -m pytest -v tests', output: green, exitCode: 0 });
    expect(codePoints(r.text)).toBeLessThan(codePoints(green) / 5);
    expect(r.text).toContain('112 passed in 4.52s');
  });
});

describe('faithful on red, as a property', () => {
  // Failure lines taken from the real fixtures by the rules above (one family each), and noise
  // lines shaped like the passing output around them.
  const failures = [
    ...DIAGNOSTICS['pytest-assert-fail.txt']!(fixture('pytest-assert-fail.txt')).filter(
      (l) => l.startsWith('E ') || l.startsWith('FAILED '),
    ),
    ...matching(fixture('java-exception.txt'), /^(Exception in thread |Caused by: )/),
    ...DIAGNOSTICS['tsc-errors.txt']!(fixture('tsc-errors.txt')).slice(0, 10),
    ...DIAGNOSTICS['npm-install-fail.txt']!(fixture('npm-install-fail.txt')),
    ...matching(fixture('go-panic.txt'), /^panic: /),
    ...matching(fixture('cargo-test-fail.txt'), /panicked at /),
  ];
  const noise = fc.oneof(
    fc.nat(999).map((i) => `tests/test_m${i % 9}.py::test_case_${i} PASSED${' '.repeat(20)}[ ${i % 100}%]`),
    fc
      .nat(99_999)
      .map(
        (i) => `2026-12-01 09:03:28,${String(i % 1000).padStart(3, '0')} INFO worker: job ${i} done: value=${i * 3}`,
      ),
    fc
      .nat(999)
      .map(
        (i) =>
          `[INFO] Tests run: 5, Failures: 0, Errors: 0, Skipped: 0, Time elapsed: 0.0${i % 10} s -- in com.acme.M${i}Test`,
      ),
  );

  it('every inserted failure line within the budget is in the view, whatever the noise and the command', () => {
    fc.assert(
      fc.property(
        fc.array(noise, { minLength: 50, maxLength: 400 }),
        fc.uniqueArray(fc.constantFrom(...failures), { minLength: 1, maxLength: 12 }),
        fc.array(fc.nat(), { minLength: 12, maxLength: 12 }),
        fc.constantFrom(undefined, 'make check', 'python3 -m pytest -v', 'mvn -B test', 'npm test'),
        (base, inserted, at, command) => {
          const out = [...base];
          inserted.forEach((line, k) => out.splice(at[k]! % (out.length + 1), 0, line));
          const r = compactTerminal({
            output: out.join('\n'),
            exitCode: 1,
            ...(command === undefined ? {} : { command }),
          });
          const shown = new Set(splitLines(r.text));
          for (const line of inserted) expect(shown, line).toContain(line);
        },
      ),
      { numRuns: 60 },
    );
  });
});

describe('search views keep match lines', () => {
  /** `path:line:text` lines of a grep/rg fixture, grouped by file in order. */
  const byFile = (raw: string): Map<string, string[]> => {
    const m = new Map<string, string[]>();
    for (const l of lines(raw)) {
      const hit = /^([^:]+):(\d+):/.exec(l);
      if (hit !== null) m.set(hit[1]!, [...(m.get(hit[1]!) ?? []), l]);
    }
    return m;
  };

  for (const name of ['grep-rn-wide.txt', 'grep-rn.txt', 'rg-n.txt']) {
    it(`${name}: match lines verbatim with their line numbers, the first ones of each file first, exact counts`, async () => {
      const { raw, out } = await view(name);
      expect(codePoints(out)).toBeLessThan(codePoints(raw));
      await expectRecovers(vault, out, raw);
      const files = byFile(raw);
      const shown = splitLines(out);
      const shownSet = new Set(shown);
      const shownMatches = shown.filter((l) => /^[^:\s]+:\d+:/.test(l));
      expect(shownMatches.length).toBeGreaterThanOrEqual(Math.min(40, files.size));
      for (const l of shownMatches) expect(raw.split('\n')).toContain(l);
      let filesWithLines = 0;
      for (const [, matches] of files) {
        const mine = matches.filter((l) => shownSet.has(l));
        if (mine.length === 0) continue;
        filesWithLines += 1;
        // The first matches of a file, in order, and its exact count.
        expect(mine).toEqual(matches.slice(0, mine.length));
        const more = shown[shown.indexOf(mine.at(-1)!) + 1] ?? '';
        if (mine.length < matches.length)
          expect(more).toBe(`  \u2026 +${matches.length - mine.length} more in this file`);
      }
      expect(filesWithLines).toBeGreaterThanOrEqual(Math.min(40, files.size));
      const term = /"([^"]+)"/.exec(FIXTURE_COMMANDS[name]!.command)![1]!;
      expect(shownMatches.every((l) => l.includes(term))).toBe(true);
    });
  }
});
