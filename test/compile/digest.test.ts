import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { compactTerminal } from '../../src/compact/index.js';
import { isFailureLine } from '../../src/compact/diagnostic-lines.js';
import { DIGEST_MAX_DIAGNOSTICS, failingTestIds, renderDigest } from '../../src/compile/digest.js';
import { boundedView } from '../../src/compile/duplicates.js';
import { FIXTURE_COMMANDS } from '../fixtures/terminal/commands.js';
import { pytestThreeFailures, readLog40k } from '../support/failing-outputs.js';

const dir = join(dirname(fileURLToPath(import.meta.url)), '../fixtures/terminal');
const fixture = (name: string): string => readFileSync(join(dir, name), 'utf8');

describe('digests keep what an agent acts on', () => {
  it('keep every failing test id of a run whose E lines alone overflow the budget', () => {
    const text = pytestThreeFailures();
    const digest = renderDigest(text, 'RECEIPT', { diagnosticChars: 400 });
    for (const id of ['test_summary_layout', 'test_reorder_list', 'test_value_after_removal'])
      expect(digest).toContain(`FAILED tests/test_reports.py::${id}`);
    expect(digest.split('\n')[0]).toBe('[Token Terminator digest | 204 lines | 3 failed]');
    expect(digest.endsWith('RECEIPT')).toBe(true);
  });

  it('keep diagnostic lines up to the bound, then count the rest', () => {
    const lines = Array.from(
      { length: DIGEST_MAX_DIAGNOSTICS + 20 },
      (_, i) => `src/m${i}.ts(1,1): error TS2304: x${i}`,
    );
    const digest = renderDigest(['tsc', ...lines].join('\n'), 'R', { diagnosticChars: 400 });
    for (const l of lines.slice(0, DIGEST_MAX_DIAGNOSTICS)) expect(digest).toContain(l);
    expect(digest).toContain('\u2026 20 more diagnostic lines (see the receipt) \u2026');
  });

  it('name what a file read holds: its path, line range and definitions', () => {
    const text = Array.from({ length: 40 }, (_, i) =>
      i === 3 ? `${i + 11}: def parse_args(argv):` : i === 20 ? `${i + 11}: class Config:` : `${i + 11}:     x = ${i}`,
    ).join('\n');
    const digest = renderDigest(text, 'R', { diagnosticChars: 400, args: JSON.stringify({ path: 'src/app.py' }) });
    expect(digest.split('\n')[2]).toBe('[holds: src/app.py | lines 11-50 | defs: parse_args, Config]');
  });

  it('read a numbered log line by its content, and numbered source code still not as a failure', () => {
    expect(isFailureLine('00181| 2026-11-30T10:14:07Z ERROR payments.worker: charge failed')).toBe(true);
    expect(isFailureLine('  12\t[FATAL] out of memory')).toBe(true);
    expect(isFailureLine('123:        throw new IllegalStateException("boom");')).toBe(false);
    expect(isFailureLine('  40|     ERROR = 1')).toBe(false);
  });

  describe('on the captured failing runs, every failing test id survives in the digest of the output and of its first view', () => {
    const expected: Record<string, readonly string[]> = {
      'pytest-fail.txt': [
        'tests/test_m1.py::test_lookup_1',
        'tests/test_m3.py::test_division_3',
        'tests/test_m5.py::test_lookup_5',
        'tests/test_m6.py::test_division_6',
      ],
      'pytest-assert-fail.txt': [
        'tests/test_reports.py::test_summary_matches_expected_layout',
        'tests/test_reports.py::test_reorder_list_contains_low_stock',
        'tests/test_reports.py::test_value_after_removal',
        'tests/test_reports.py::test_load_rejects_bad_quantity',
        'tests/test_reports.py::test_load_reports_line_number',
      ],
      'cargo-test-fail.txt': ['tests::panics_here', 'tests::wrong_31', 'tests::wrong_32'],
      'go-test-fail.txt': ['TestMul', 'TestDivZero', 'TestShoutEmpty'],
      'vitest-fail.txt': [
        'test/m12.test.js > module 12 > handles edge 12',
        'test/m8.test.js > module 8 > handles edge 8',
        'test/m4.test.js > module 4 > handles edge 4',
      ],
      'mvn-test-fail.txt': ['com.acme.ledger.ImportTest.balanceAfterRefund'],
    };
    for (const [name, ids] of Object.entries(expected)) {
      it(name, () => {
        const output = fixture(name);
        for (const id of ids) expect(failingTestIds(output.split('\n')).map((x) => x.id)).toContain(id);
        const digest = renderDigest(output, 'R', { diagnosticChars: 400 });
        for (const id of ids) expect(digest, id).toContain(id);
        const { command, exitCode } = FIXTURE_COMMANDS[name]!;
        const view = compactTerminal(exitCode === undefined ? { command, output } : { command, output, exitCode }).text;
        const ofView = renderDigest(view, 'R', { diagnosticChars: 400, view: true });
        for (const id of ids) expect(ofView, id).toContain(id);
      });
    }
  });
});

describe('bounded views of large outputs keep what an agent acts on', () => {
  it('keep both ERROR records of a 40 kB log read through a numbered read tool, with the lines around them', () => {
    const { text, errors } = readLog40k();
    const view = boundedView(text, 8000);
    expect(view.length).toBeLessThan(9000);
    const lines = text.split('\n');
    for (const e of errors) {
      const at = lines.findIndex((l) => l.endsWith(e));
      expect(view).toContain(lines[at]!);
      expect(view).toContain(lines[at - 1]!);
      expect(view).toContain(lines[at + 1]!);
    }
  });

  it('keep every failing test id and the traceback of a long failing run', () => {
    const text = pytestThreeFailures(200);
    const view = boundedView(text, 8000);
    for (const id of ['test_summary_layout', 'test_reorder_list', 'test_value_after_removal'])
      expect(view).toContain(`FAILED tests/test_reports.py::${id}`);
  });
});
