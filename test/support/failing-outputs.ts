/** Failing outputs an agent acts on, shared by the digest, view and sight tests. */

/** A pytest run of three failing tests whose `E` lines alone are longer than the default 400-char budget. */
export function pytestThreeFailures(eLines = 40): string {
  const block = (name: string): string[] => [
    `________________________________ ${name} ________________________________`,
    '',
    `    def ${name}():`,
    '>       assert render(load("fixtures/report.json")) == expected_layout()',
    ...Array.from(
      { length: eLines },
      (_, i) => `E         - line ${i} of the expected layout differs in column ${i * 3}`,
    ),
    '',
    `tests/test_reports.py:${40 + eLines}: AssertionError`,
  ];
  return [
    '============================= test session starts ==============================',
    'collected 60 items',
    '',
    ...Array.from({ length: 57 }, (_, i) => `tests/test_misc.py::test_ok_${i} PASSED`),
    '=================================== FAILURES ===================================',
    ...block('test_summary_layout'),
    ...block('test_reorder_list'),
    ...block('test_value_after_removal'),
    '=========================== short test summary info ============================',
    'FAILED tests/test_reports.py::test_summary_layout - AssertionError: assert [...]',
    'FAILED tests/test_reports.py::test_reorder_list - AssertionError: assert [...]',
    'FAILED tests/test_reports.py::test_value_after_removal - AssertionError: assert [...]',
    '========================= 3 failed, 57 passed in 0.41s =========================',
  ].join('\n');
}

/** A log file of about 40 kB as opencode's `read` tool shows it (numbered lines), with two ERROR records. */
export function readLog40k(): { text: string; errors: string[] } {
  const errors = [
    '2026-11-30T10:14:07.512Z ERROR payments.worker: charge 4471 failed: upstream timeout after 30000 ms',
    '2026-11-30T10:31:55.004Z ERROR payments.worker: ledger write rejected: duplicate key idx_ledger_ref',
  ];
  const lines: string[] = [];
  for (let i = 0; lines.join('\n').length < 40_000; i++) {
    const record =
      i === 180
        ? errors[0]!
        : i === 260
          ? errors[1]!
          : `2026-11-30T10:${String(i % 60).padStart(2, '0')}:00.000Z INFO  payments.worker: processed batch ${i} (${(i * 7) % 50} items)`;
    lines.push(`${String(i + 1).padStart(5, '0')}| ${record}`);
  }
  return { text: `<file>\n${lines.join('\n')}\n</file>`, errors };
}
