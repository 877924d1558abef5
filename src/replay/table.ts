/** Human-readable rendering of replay figures (cli-table3; plain ASCII borders, no colours). */
import Table from 'cli-table3';
import type { ReplayFigures, SessionFigures } from './figures.js';

const plain = { head: [], border: [] };
const int = (n: number): string => n.toLocaleString('en-US');

/**
 * Two tables: per-session rows (when more than one session) and the totals.
 *
 * @example
 * console.log(renderFiguresTable(await replaySessions(sessions), { maxSessions: 20 }));
 */
export function renderFiguresTable(f: ReplayFigures, options: { maxSessions?: number } = {}): string {
  const out: string[] = [];
  const maxSessions = options.maxSessions ?? 60;
  if (f.sessions.length > 1) {
    out.push(sessionsTable(f, maxSessions));
    if (f.sessions.length > maxSessions)
      out.push(`… ${f.sessions.length - maxSessions} more sessions (use --json for all)`);
  }
  const t = new Table({ head: ['figure', 'raw', 'final', 'ratio / %'], style: plain });
  t.push(...totalRows(f));
  out.push(t.toString(), summaryLine(f));
  return out.join('\n');
}

/**
 * The table in one line, the figure that matters first: the cost with prompt caching and the
 * simulated recoveries priced in (what a user pays), then the tokens sent, then sight at use (what
 * the agent could see of what it reused when it acted).
 *
 * @example
 * summaryLine(figures) // 'summary: 19.36 % cheaper net of recoveries (cost ratio 0.8064, …) · 52.46 % fewer tokens …'
 */
export function summaryLine(f: ReplayFigures): string {
  const net = f.effective_cost_with_recoveries_ratio;
  const cost =
    net <= 1
      ? `${((1 - net) * 100).toFixed(2)} % cheaper net of recoveries`
      : `${((net - 1) * 100).toFixed(2)} % MORE expensive net of recoveries`;
  const recoveries = `${int(f.simulated_recoveries)} simulated recover${f.simulated_recoveries === 1 ? 'y' : 'ies'}`;
  const tokens = pct(f.raw_tokens, f.final_tokens) || 'no tokens';
  const c = f.fidelity;
  const sight =
    c.use_lines + c.use_words === 0
      ? 'sight at use: nothing reused to check'
      : `sight at use: ${c.use_lines_visible}/${c.use_lines} lines and ${c.use_words_visible}/${c.use_words} words the agent reused were in view when it acted`;
  return `summary: ${cost} (cost ratio ${net.toFixed(4)}, ${f.pricing_profile}-style prompt cache, ${recoveries}) · ${tokens} tokens (${int(f.raw_tokens)} → ${int(f.final_tokens)}) · ${sight}`;
}

/** The per-session table's columns: heading and cell. */
const SESSION_COLUMNS: readonly (readonly [string, (s: SessionFigures) => string | number])[] = [
  ['session', (s) => shorten(s.id, 48)],
  ['req', (s) => s.requests],
  ['raw tok', (s) => int(s.raw_tokens)],
  ['final tok', (s) => int(s.final_tokens)],
  ['red %', (s) => s.reduction_pct.toFixed(2)],
  ['reuse', (s) => s.prefix_reuse.toFixed(4)],
  ['cost ratio', (s) => s.effective_cost_ratio.toFixed(4)],
  ['task %', (s) => s.task_visible_pct.toFixed(2)],
  ['actions %', (s) => s.actions_visible_pct.toFixed(2)],
  ['diag %', (s) => s.diagnostics_visible_pct.toFixed(2)],
  ['ground %', (s) => s.grounding_pct.toFixed(2)],
  ['use lines %', (s) => s.use_lines_pct.toFixed(2)],
  ['use words %', (s) => s.use_words_pct.toFixed(2)],
  ['recov', (s) => s.simulated_recoveries],
  ['cost+recov', (s) => s.effective_cost_with_recoveries_ratio.toFixed(4)],
  ['receipts', (s) => `${s.recovered_exact}/${s.receipts}`],
  ['p50 ms', (s) => s.p50_ms.toFixed(3)],
];

/** One row per session (the first `maxSessions`). */
function sessionsTable(f: ReplayFigures, maxSessions: number): string {
  const t = new Table({ head: SESSION_COLUMNS.map(([head]) => head), style: plain });
  for (const s of f.sessions.slice(0, maxSessions)) t.push(SESSION_COLUMNS.map(([, cell]) => cell(s)));
  return t.toString();
}

type Row = (string | number)[];

/** A `part/whole` row with its percentage. */
function row(label: string, part: number, whole: number, pct: number): Row {
  return [label, '', `${part}/${whole}`, `${pct.toFixed(2)} %`];
}

/**
 * The totals: sizes, cost and prefix reuse; what the model could still see (the fidelity contract);
 * recoveries, receipts, time and memory; with `--window`, requests over W − R and the fit's rewrites.
 */
function totalRows(f: ReplayFigures): Row[] {
  const d = f.fidelity;
  return [
    ['requests', int(f.requests), '', ''],
    ['chars (messages)', int(f.raw_chars), int(f.final_chars), pct(f.raw_chars, f.final_chars)],
    ['tokens (o200k_base)', int(f.raw_tokens), int(f.final_tokens), pct(f.raw_tokens, f.final_tokens)],
    ['cache prefix ratio', f.cache_prefix_ratio_raw.toFixed(4), f.cache_prefix_ratio_final.toFixed(4), ''],
    [
      'effective cost (chars)',
      int(Math.round(f.effective_cost_raw)),
      int(Math.round(f.effective_cost_final)),
      `ratio ${f.effective_cost_ratio.toFixed(4)} (${f.pricing_profile})`,
    ],
    [
      'effective cost ratio, openai / anthropic',
      '',
      '',
      `${f.effective_cost_ratio_openai.toFixed(4)} / ${f.effective_cost_ratio_anthropic.toFixed(4)}`,
    ],
    ['prefix reuse (final n → n+1)', '1.0000', f.prefix_reuse.toFixed(4), ''],
    row('task visible', d.tasks_visible, d.requests, f.task_visible_pct),
    row('actions visible', d.actions_visible, d.actions_checked, f.actions_visible_pct),
    // 0/0 is reported as 100 % in the JSON (nothing could be missing); the table says there was nothing to check.
    d.diagnostic_lines === 0
      ? ['diagnostic lines visible', '', `${d.diagnostic_lines_visible}/0`, 'none to check']
      : row('diagnostic lines visible', d.diagnostic_lines_visible, d.diagnostic_lines, f.diagnostics_visible_pct),
    row('grounding strings visible', d.grounding_strings_visible, d.grounding_strings, f.grounding_pct),
    row('lines used from earlier outputs, visible at use', d.use_lines_visible, d.use_lines, f.use_lines_pct),
    row('words used from earlier outputs, visible at use', d.use_words_visible, d.use_words, f.use_words_pct),
    row(
      'actions quoting a line they could not see',
      d.use_actions_missing_line,
      d.use_actions,
      f.actions_missing_use_pct,
    ),
    [
      'simulated recoveries (actions missing a used item)',
      '',
      int(f.simulated_recoveries),
      `cost with them ${f.effective_cost_with_recoveries_ratio.toFixed(4)} (${f.pricing_profile}); openai / anthropic ${f.effective_cost_with_recoveries_ratio_openai.toFixed(4)} / ${f.effective_cost_with_recoveries_ratio_anthropic.toFixed(4)}`,
    ],
    [
      'receipts recovered exactly',
      '',
      `${f.recovered_exact}/${f.receipts}`,
      f.recovery_failures === 0 ? 'no failures' : `${f.recovery_failures} FAILED`,
    ],
    [
      'pipeline ms per request',
      '',
      `p50 ${f.p50_ms.toFixed(3)}  p95 ${f.p95_ms.toFixed(3)}`,
      `total ${f.total_ms.toFixed(1)}`,
    ],
    ['peak RSS (MB)', '', f.peak_rss_mb.toFixed(1), ''],
    ...(f.requests_over_window_raw === undefined
      ? []
      : [
          [
            'requests over the window (raw / sent)',
            '',
            `${int(f.requests_over_window_raw)} / ${int(f.requests_over_window_sent ?? 0)}`,
            `${int(f.requests_window_unfittable ?? 0)} unfittable (window_exceeded)`,
          ],
          ['window rewrites (cache-breaking fits)', '', int(f.window_rewrites ?? 0), ''],
        ]),
  ];
}

/** A reduction as "% fewer"; a request that grew says so instead of printing a negative saving. */
function pct(raw: number, final: number): string {
  if (raw <= 0) return '';
  return `${((Math.abs(raw - final) / raw) * 100).toFixed(2)} % ${final <= raw ? 'fewer' : 'MORE'}`;
}

function shorten(s: string, max: number): string {
  return s.length <= max ? s : `…${s.slice(s.length - max + 1)}`;
}
