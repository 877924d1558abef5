/**
 * The fidelity figures of replay on a small hand-built session, every definition checked against
 * counts worked out by hand (see the comments). The pipeline is a deterministic stand-in that hides
 * one thing per request, so each figure has something to miss.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalJson, createTiktokenCounter } from '../../src/measure/index.js';
import type { TokenCounter } from '../../src/measure/types.js';
import { diagnosticLines, isDiagnosticLine } from '../../src/measure/diagnostic-ruler.js';
import { groundingStrings } from '../../src/replay/fidelity.js';
import { replaySessions, type RecordedSession, type ReplayFigures } from '../../src/replay/index.js';
import { unwrapObservation } from '../../src/replay/replay.js';
import { createTerminator, type Terminator } from '../../src/runtime/index.js';
import { advance, type ProviderRequest } from '../../src/step.js';
import { fixture } from '../operators/tool-helpers.js';

type Msg = Record<string, unknown>;

const filler = Array.from(
  { length: 130 },
  (_, i) => `tests/test_util.py::test_ok_${String.fromCharCode(97 + (i % 26))} PASSED`,
).join('\n');
// m4: a 4,000+ char pytest run with four diagnostic lines and one path the next actions use.
const DIAG = [
  "E       assert parse_config('x') == 3",
  'FAILED tests/test_config.py::test_parse - AssertionError',
  'src/app/loader_impl.py:88: ValueError',
  "ValueError: bad alias 'x'",
];
const m4 = `${filler}\n${DIAG.join('\n')}\n${filler.slice(0, 600)}`;
// m6: a text-protocol observation (a user message the default pattern recognises), 1,000+ chars.
const code = Array.from({ length: 45 }, (_, i) => `    # comment line ${String.fromCharCode(97 + (i % 26))}`).join(
  '\n',
);
const m6 = `<returncode>0</returncode>\n<output>\n    def load(key):\n${code}\n        return resolve_alias(name)\n    def resolve_alias(name):\n        pass\n</output>`;

const session: RecordedSession = {
  id: 'fidelity#0',
  model: 'gpt-4o',
  messages: [
    { role: 'system', content: 'SYS' },
    { role: 'user', content: 'DEMO of the interface' },
    { role: 'user', content: 'TASK: fix parse_config in src/app/config.py' },
    {
      role: 'assistant',
      content: "I'll run the tests.\n```bash\npytest -q tests\n```",
      tool_calls: [
        { id: 'c1', type: 'function', function: { name: 'bash', arguments: '{"command": "pytest -q tests"}' } },
      ],
    },
    { role: 'tool', tool_call_id: 'c1', content: m4 },
    { role: 'assistant', content: 'Open the loader.\n```bash\nsed -n 80,95p src/app/loader_impl.py\n```' },
    { role: 'user', content: m6 },
    {
      role: 'assistant',
      content: 'Fix it.',
      tool_calls: [
        {
          id: 'c2',
          type: 'function',
          function: {
            name: 'edit',
            arguments: '{"path": "src/app/loader_impl.py", "line": 91, "text": "return resolve_alias(name)"}',
          },
        },
      ],
    },
    { role: 'tool', tool_call_id: 'c2', content: 'ok' },
    { role: 'assistant', content: 'Done.' },
  ],
};

/** What the stand-in pipeline does to request k (raw messages → final messages). */
function hide(k: number, messages: Msg[]): Msg[] {
  return messages.map((m, j) => {
    if (k === 1 && j === 4) return { ...m, content: String(m['content']).replace(`${DIAG[1]}\n`, '') }; // one diagnostic line
    if (k === 2 && j === 2) return { ...m, content: 'TASK (in the vault)' }; // the task
    if (k === 2 && j === 6) return { ...m, content: String(m['content']).replaceAll('resolve_alias', 'XXX') }; // one grounding string
    if (k === 3 && j === 3)
      return { ...m, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'bash', arguments: '{}' } }] }; // one action
    return m;
  });
}

let dir: string;
let counter: TokenCounter;
let figures: ReplayFigures;
let toolNames: string[];
let toolContents: { content: string; exitCode: number | undefined }[];
let finals: Msg[][];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tt-fidelity-'));
  counter = createTiktokenCounter();
  const real = await createTerminator({ env: {}, overrides: { dbPath: join(dir, 'v.sqlite3') } });
  toolNames = [];
  toolContents = [];
  finals = [];
  let k = 0;
  const tt: Terminator = {
    ...real,
    reduceToolResult: async (result, context) => {
      toolNames.push(`${result.name}:${JSON.stringify(result.args)}`);
      toolContents.push({ content: result.content, exitCode: result.exitCode });
      return { value: result, original: result, context, decisions: [] };
    },
    reduceRequest: async (request: ProviderRequest, context) => {
      const step = { value: request, original: request, context, decisions: [] };
      const messages = hide(k++, request['messages'] as Msg[]);
      finals.push(messages);
      return advance(step, { ...request, messages }, { stage: 'fake_request', kind: 'applied', reason: 'test' });
    },
  };
  const pricing = { name: 'custom', cacheRead: 0.1, cacheWrite: 1.25, minCachePrefixTokens: 0 };
  figures = await replaySessions([session], { terminator: tt, counter, ledger: false, pricing });
  await real.close();
});

afterAll(() => {
  counter.dispose?.();
  rmSync(dir, { recursive: true, force: true });
});

/** Length in code points. */
const cp = (s: string): number => [...s].length;
/** Length in code points of the common prefix of `a` and `b`. */
const lcp = (a: string, b: string): number => {
  const [x, y] = [[...a], [...b]];
  let n = 0;
  while (n < x.length && n < y.length && x[n] === y[n]) n++;
  return n;
};

describe('replay fidelity figures (computed by hand)', () => {
  it('sends the recognised observation through the tool stream as the output of the command block before it', () => {
    expect(toolNames).toEqual([
      'terminal:{"command":"pytest -q tests"}',
      'terminal:{"command":"sed -n 80,95p src/app/loader_impl.py"}',
      'edit:{"path":"src/app/loader_impl.py","line":91,"text":"return resolve_alias(name)"}',
    ]);
  });

  it("unwraps mini-swe-agent's observation template: the tool stream gets the command's own output and exit code", () => {
    const inner = m6.slice('<returncode>0</returncode>\n<output>\n'.length, -'\n</output>'.length);
    expect(toolContents[1]).toEqual({ content: inner, exitCode: 0 });
    expect(unwrapObservation('<returncode>2</returncode>\n<output>\nboom\n</output>')!.wrap('b')).toBe(
      '<returncode>2</returncode>\n<output>\nb\n</output>',
    );
    expect(unwrapObservation('OBSERVATION:\nplain')).toBeUndefined();
  });

  it('task: 3 of 4 requests show every instruction-prefix message (request 2 lost the task)', () => {
    expect(figures.fidelity).toMatchObject({ requests: 4, tasks_visible: 3 });
    expect(figures.task_visible_pct).toBe(75);
  });

  it('actions: 0 + 1 + 2 + 3 earlier actions checked, the tool-call arguments of message 3 missing in request 3', () => {
    // Request 1: m3's arguments (its fenced block does not count: it has tool calls). Request 2:
    // m3 and m5's fenced block body. Request 3: m3 (hidden), m5, m7.
    expect(figures.fidelity).toMatchObject({ actions_checked: 6, actions_visible: 5 });
    expect(figures.actions_visible_pct).toBe(83.33);
  });

  it('diagnostics: the four diagnostic lines of the 4,000+ char output, one hidden in the first request after it', () => {
    expect(m4.length).toBeGreaterThanOrEqual(4000);
    expect(diagnosticLines(m4)).toEqual(DIAG);
    expect(figures.fidelity).toMatchObject({ diagnostic_lines: 4, diagnostic_lines_visible: 3 });
    expect(figures.diagnostics_visible_pct).toBe(75);
  });

  it('grounding: 1 string learned from m4 (the path), 4 from the observation (91, return, resolve_alias, name), resolve_alias hidden', () => {
    expect(groundingStrings('sed -n 80,95p src/app/loader_impl.py')).toEqual(
      ['sed', '80', 'src/app/loader_impl.py'].filter((s) => s !== 'sed'),
    );
    expect(
      groundingStrings('{"path": "src/app/loader_impl.py", "line": 91, "text": "return resolve_alias(name)"}'),
    ).toEqual(['src/app/loader_impl.py', '91', 'return', 'resolve_alias', 'name']);
    expect(figures.fidelity).toMatchObject({ grounding_strings: 5, grounding_strings_visible: 4 });
    expect(figures.grounding_pct).toBe(80);
  });

  it('prefix reuse: Σ common prefix of final n and n+1 over Σ size of final n, over the serialized messages', () => {
    const items = (ms: Msg[]): string[] => ms.map((m) => canonicalJson(m));
    let common = 0;
    let base = 0;
    for (let n = 0; n + 1 < finals.length; n++) {
      const [a, b] = [items(finals[n]!), items(finals[n + 1]!)];
      base += a.reduce((s, x) => s + cp(x), 0);
      let j = 0;
      while (j < a.length && a[j] === b[j]) common += cp(a[j++]!);
      if (j < a.length) common += lcp(a[j]!, b[j]!);
    }
    // Requests 1→2 and 2→3 break inside message 2 (the task hidden, then shown again).
    expect(common).toBeLessThan(base);
    expect(figures.prefix_reuse).toBe(Math.round((common / base) * 1e4) / 1e4);
  });

  it('effective cost: the given profile (0.1 / 1.25, no minimum) for effective_cost_*, the built-ins beside it', () => {
    const arr = (ms: Msg[]): string => canonicalJson(ms);
    const raws = [3, 5, 7, 9].map((end) => session.messages.slice(0, end) as Msg[]);
    const cost = (reqs: Msg[][], read: number, write: number, min: number): number =>
      reqs.reduce((sum, r, n) => {
        const size = cp(arr(r));
        const prefix = n === 0 ? 0 : lcp(arr(reqs[n - 1]!), arr(r));
        const perChar = counter.count(arr(r)) / size;
        if (size * perChar < min) return sum + size; // below the minimum nothing is cached or written
        const hit = prefix * perChar >= min ? prefix : 0;
        return sum + read * hit + write * (size - hit);
      }, 0);
    const r4 = (x: number): number => Math.round(x * 1e4) / 1e4;
    expect(figures.pricing_profile).toBe('custom');
    expect(figures.effective_cost_ratio).toBe(r4(cost(finals, 0.1, 1.25, 0) / cost(raws, 0.1, 1.25, 0)));
    // The built-ins have a 1,024-token minimum: request 0 is below it (billed at 1 ×, uncached).
    expect(counter.count(arr(raws[0]!))).toBeLessThan(1024);
    expect(figures.effective_cost_ratio_openai).toBe(r4(cost(finals, 0.1, 1, 1024) / cost(raws, 0.1, 1, 1024)));
    expect(figures.effective_cost_ratio_anthropic).toBe(
      r4(cost(finals, 0.1, 1.25, 1024) / cost(raws, 0.1, 1.25, 1024)),
    );
    expect(figures.effective_cost_ratio_anthropic).not.toBe(figures.effective_cost_ratio_openai);
  });

  it('the same figures per session', () => {
    const { id, ...one } = figures.sessions[0]!;
    expect(id).toBe('fidelity#0');
    const { peak_rss_mb: _rss, sessions: _s, ...top } = figures;
    expect(one).toEqual(top);
  });
});

/** Each of `lines` is a diagnostic line (`expected` true) or none is (false). */
function expectDiagnostic(expected: boolean, lines: readonly string[]): void {
  for (const line of lines) expect(isDiagnosticLine(line), line).toBe(expected);
}

describe('the diagnostic-line pattern', () => {
  it('counts failure lines and leaves passing output, source code and file names alone', () => {
    expectDiagnostic(true, [
      "E       KeyError: 'b'",
      'FAILED tests/t.py::test_a - KeyError',
      'Traceback (most recent call last):',
      'java.lang.IllegalStateException: boom',
      'Caused by: java.io.IOException: x',
      'src/a.ts(2,14): error TS2322: Type',
      'Foo.java:12: error: cannot find symbol',
      '[ERROR] Failed to execute goal',
      'npm error code ENOTCACHED',
      'panic: runtime error: index out of range',
      '--- FAIL: TestMul (0.00s)',
      'error: could not compile `x`',
      'bash: foo: command not found',
      'Process exited with code 2',
      'tests/test_x.py:12: AssertionError',
    ]);
    expectDiagnostic(false, [
      'tests/test_a.py::test_ok PASSED',
      '1196:    public static Type[] getReturnTypes(Method method) {',
      'JsonMappingException.html',
      'src/main/java/FooException.java',
      '5 passed in 0.2s',
      'exit code 0',
      '123:        throw new IllegalArgumentException("x");',
    ]);
  });
});

describe('the diagnostic-line pattern on real captured outputs (test/fixtures/terminal)', () => {
  const failing = [
    'pytest-fail.txt',
    'pytest-assert-fail.txt',
    'python-traceback.txt',
    'java-exception.txt',
    'mvn-test-fail.txt',
    'mvn-offline-fail.txt',
    'javac-errors.txt',
    'tsc-errors.txt',
    'eslint-fail.txt',
    'npm-install-fail.txt',
    'go-panic.txt',
    'go-test-fail.txt',
    'go-vet.txt',
    'cargo-test-fail.txt',
    'cargo-build-errors.txt',
    'vitest-fail.txt',
  ];
  const passing = [
    'git-diff.txt',
    'git-log.txt',
    'git-status.txt',
    'find.txt',
    'ls-r.txt',
    'ls-la.txt',
    'tree.txt',
    'grep-rn.txt',
    'rg-n.txt',
    'npm-install.txt',
    'npm-ls.txt',
    'python-importtime.txt',
  ];
  const wrapped = (name: string, code: number): string =>
    `<returncode>${code}</returncode>\n<output>\n${fixture(name)}\n</output>`;

  it("finds diagnostic lines in every failing run, also inside mini-swe-agent's observation template, and none in passing output", () => {
    for (const name of failing) {
      const lines = diagnosticLines(wrapped(name, 1));
      expect(lines.length, name).toBeGreaterThan(1);
      expect(lines, name).toContain('<returncode>1</returncode>');
    }
    for (const name of passing) expect(diagnosticLines(wrapped(name, 0)), name).toEqual([]);
  });

  it('a Python traceback ends in its exception line whatever the exception is called', () => {
    const tb = [
      'Traceback (most recent call last):',
      '  File "manage.py", line 3, in <module>',
      '    main()',
      'django.core.exceptions.ImproperlyConfigured: SECRET_KEY must not be empty',
      'done',
    ].join('\n');
    expect(diagnosticLines(tb)).toEqual([
      'Traceback (most recent call last):',
      'django.core.exceptions.ImproperlyConfigured: SECRET_KEY must not be empty',
    ]);
    expect(
      diagnosticLines('Traceback (most recent call last):\n  File "a.py", line 1, in <module>\nKeyboardInterrupt'),
    ).toContain('KeyboardInterrupt');
    // Outside a traceback such a line is ordinary text.
    expect(diagnosticLines('ImproperlyConfigured: hint\nKeyboardInterrupt')).toEqual([]);
    expect(diagnosticLines(fixture('python-traceback.txt'))).toContain(
      'calc.evaluator.EvalError: job 241: division by zero in nested expression',
    );
  });

  it("counts Go's per-package FAIL lines, ESLint's stylish errors and Go vet findings", () => {
    expectDiagnostic(true, [
      'FAIL\texample.com/capdemo/calc\t0.015s',
      'FAIL',
      "  2:5  error  'x' is assigned a value but never used  no-unused-vars",
      './main.go:12:2: undefined: x',
    ]);
    expectDiagnostic(false, [
      'ok  \texample.com/okpkg\t0.002s',
      '  2:5  warning  Unexpected console statement  no-console',
      'FAILOVER ready',
    ]);
  });
});
