/**
 * `renderReport(figures)`: the whole report as one self-contained HTML string — inline CSS, charts
 * as finished SVG, a few lines of inline script for the session picker and table sorting (the page
 * reads fully without it). Pure: the same figures and options give the same bytes, nothing is
 * read or fetched, so a gateway can serve it as is (`res.end(renderReport(figures))`).
 *
 * Every number shown is the figure's own value (integers grouped, at most 4 decimals) and carries
 * `data-key` (its JSON key) and `data-value`, so tests and scripts can check it against the input.
 */
import {
  countBarsChart,
  costChart,
  cumulativeSavingsChart,
  percentBarsChart,
  savingsByStageChart,
  tokensPerRequestChart,
  COLORS,
  STAGE_COLORS,
} from './charts.js';
import {
  costProfiles,
  FIDELITY_KEYS,
  recoveryCostProfiles,
  savedByStage,
  type CostProfile,
  type FidelityKey,
  type ReportInput,
  type ReportSessionInput,
} from './figures.js';
import { esc, num } from './html.js';
import { priceFigures, type RateCard } from './rate-card.js';
import { QUALITY_SECTION_ID, renderQuality, type QualitySummary } from './quality.js';

/** Options of {@link renderReport}. */
export interface RenderReportOptions {
  /** Page title. @defaultValue "token-terminator report" */
  readonly title?: string;
  /** Where the figures came from, shown under the title (e.g. "replay of 40 sessions"). @defaultValue none */
  readonly source?: string;
  /** Timestamp shown in the footer. @defaultValue none (the page is then a pure function of the figures) */
  readonly generatedAt?: string;
  /** Sessions offered in the per-request chart's picker, largest first. @defaultValue 50 */
  readonly maxChartSessions?: number;
  /** Answer-quality results of `token-terminator eval`, shown as their own section. @defaultValue none */
  readonly quality?: QualitySummary;
  /**
   * API-equivalent prices (TOKEN_TERMINATOR_EQ_*, see `rateCardFromConfig`): the cost section then
   * also prices the tokens in USD, labelled as an equivalent.
   *
   * @defaultValue none (no USD figures)
   */
  readonly rateCard?: RateCard;
}

const FIDELITY_LABELS: Readonly<Record<FidelityKey, string>> = Object.freeze({
  task_visible_pct: 'task visible',
  actions_visible_pct: 'own actions visible',
  diagnostics_visible_pct: 'diagnostic lines visible',
  grounding_pct: 'grounding kept',
  use_lines_pct: 'lines in sight at use',
  use_words_pct: 'words in sight at use',
  prefix_reuse: 'prefix reuse',
});

const NOT_MEASURED = '<span class="na">not measured</span>';
const opt = (key: string, value: number | undefined, suffix = ''): string =>
  value === undefined ? NOT_MEASURED : num(key, value, suffix);

/**
 * Render the report page.
 *
 * @example
 * await writeFile('report.html', renderReport(readVaultFigures('artifacts.sqlite3')));
 */
export function renderReport(figures: ReportInput, options: RenderReportOptions = {}): string {
  const title = options.title ?? 'token-terminator report';
  const sections = [
    summarySection(figures),
    tokensSection(figures, options.maxChartSessions ?? 50),
    savingsSection(figures),
    costSection(figures, options.rateCard),
    fidelitySection(figures),
    recoverySection(figures, options.quality),
    ...(options.quality === undefined ? [] : [renderQuality(options.quality)]),
    sessionsSection(figures),
  ];
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)}</title>
<style>${CSS}</style>
</head>
<body>
<main>
<header>
<h1>${esc(title)}</h1>
<p class="lede">What the pipeline sent compared with what the agent would have sent, and whether the model could still see what it needs.${options.source === undefined ? '' : ` Source: ${esc(options.source)}.`} Content-free: numbers, mechanism names and session ids only.</p>
<nav aria-label="sections"><a href="#summary">summary</a> · <a href="#tokens">tokens per request</a> · <a href="#savings">savings by mechanism</a> · <a href="#cost">cost with caching</a> · <a href="#fidelity">fidelity</a> · <a href="#recovery">recovery</a>${options.quality === undefined ? '' : ` · <a href="#${QUALITY_SECTION_ID}">answer quality</a>`} · <a href="#sessions">sessions</a></nav>
</header>
${sections.join('\n')}
<footer><p>Tokens: o200k_base over each request's messages unless the figures say otherwise. Effective cost: uncached size plus the cache-read price times the prefix shared with the previous request, summed, final over raw. Absent figures were not measured by the run that produced this page.${options.generatedAt === undefined ? '' : ` Generated ${esc(options.generatedAt)}.`}</p></footer>
</main>
<script>${SCRIPT}</script>
</body>
</html>
`;
}

function figure(id: string, heading: string, caption: string, chart: string, table: string): string {
  return `<figure class="chart" aria-labelledby="${id}-cap">
<figcaption id="${id}-cap"><strong>${esc(heading)}</strong> ${esc(caption)}</figcaption>
${chart}
<details><summary>Data table: ${esc(heading.toLowerCase())}</summary>${table}</details>
</figure>`;
}

function table(caption: string, head: readonly string[], rows: readonly (readonly string[])[]): string {
  return `<table><caption>${esc(caption)}</caption><thead><tr>${head.map((h) => `<th scope="col">${esc(h)}</th>`).join('')}</tr></thead><tbody>${rows
    .map((r) => `<tr>${r.map((c, i) => (i === 0 ? `<th scope="row">${c}</th>` : `<td>${c}</td>`)).join('')}</tr>`)
    .join('')}</tbody></table>`;
}

function summarySection(f: ReportInput): string {
  const saved = f.raw_tokens - f.final_tokens;
  const ratios = (profiles: readonly CostProfile[]): string =>
    profiles.length === 0
      ? NOT_MEASURED
      : profiles.map((p) => `${num(p.key, p.ratio)} <small>${esc(p.name)}</small>`).join('<br>');
  const tiles = [
    ['tokens sent', `${num('final_tokens', f.final_tokens)} <small>of ${num('raw_tokens', f.raw_tokens)} raw</small>`],
    saved >= 0
      ? [
          'tokens saved',
          `${num('saved_tokens', saved)}${f.reduction_pct === undefined ? '' : ` <small>${num('reduction_pct', f.reduction_pct, ' %')} fewer</small>`}`,
        ]
      : ['tokens saved', `none <small>${costlierThanRaw(f, -saved)}</small>`],
    [
      'requests',
      `${num('requests', f.requests)} <small>in ${num('sessions', f.session_count ?? f.sessions.length)} sessions</small>`,
    ],
    // The figure `replay` ends with: what a live run would pay, the recoveries hidden content forces included.
    ['cost net of recoveries', ratios(recoveryCostProfiles(f))],
    ['effective cost', ratios(costProfiles(f))],
    [
      'receipts recovered exactly',
      f.receipts === undefined
        ? NOT_MEASURED
        : `${opt('recovered_exact', f.recovered_exact)} <small>of ${num('receipts', f.receipts)}</small>`,
    ],
    ['task visible', opt('task_visible_pct', f.task_visible_pct, ' %')],
  ];
  return `<section id="summary" aria-labelledby="summary-h"><h2 id="summary-h">Summary</h2>
<dl class="tiles">${tiles.map(([k, v]) => `<div><dt>${esc(k!)}</dt><dd>${v}</dd></div>`).join('')}</dl></section>`;
}

/** Why the requests sent outweigh the client's own (never "−n % fewer", issue 31), naming recovery rounds when counted. */
function costlierThanRaw(f: ReportInput, extra: number): string {
  const calls = f.recovery_calls ?? 0;
  const reason =
    calls > 0
      ? `: the model had to recover hidden content (${num('recovery_calls', calls)} recovery calls)${f.recovery_tokens === undefined ? '' : `, and those rounds sent ${num('recovery_tokens', f.recovery_tokens)} tokens`}`
      : ': what the pipeline added (recovery rounds, restored content) outweighed what it removed';
  return `the reduction cost more than it saved: ${num('extra_tokens', extra)} tokens more than the client sent${reason}`;
}

function tokensSection(f: ReportInput, maxSessions: number): string {
  const withSeries = f.sessions
    .filter((s) => (s.per_request?.length ?? 0) > 0)
    .sort((a, b) => b.requests - a.requests || (a.id < b.id ? -1 : 1));
  const head = `<section id="tokens" aria-labelledby="tokens-h"><h2 id="tokens-h">Tokens per request across a session</h2>`;
  if (withSeries.length === 0)
    return `${head}<p>${NOT_MEASURED}: these figures have no per-request series (run <code>replay --json --series</code>, or report from the vault with <code>--db</code>).</p></section>`;
  const shown = withSeries.slice(0, Math.max(1, maxSessions));
  const picker =
    shown.length === 1
      ? ''
      : `<p><label for="session-pick">Session</label> <select id="session-pick">${shown
          .map((s, i) => `<option value="${i}">${esc(s.id)} (${s.requests} requests)</option>`)
          .join(
            '',
          )}</select>${withSeries.length > shown.length ? ` <small>${withSeries.length - shown.length} smaller sessions are in the table below only.</small>` : ''}</p>`;
  const panels = shown.map((s, i) => {
    const points = s.per_request!;
    const rows = points.map((p, j) => [
      String(j + 1),
      num('raw_tokens', p.raw_tokens),
      num('final_tokens', p.final_tokens),
      num('saved_tokens', p.raw_tokens - p.final_tokens),
    ]);
    return `<div class="session-panel" data-session="${esc(s.id)}"${i === 0 ? '' : ' hidden'}>${figure(
      `tokens-${i}`,
      `Session ${s.id}`,
      `: raw (dashed grey) and sent (blue) tokens of each of its ${points.length} requests.`,
      tokensPerRequestChart(points, s.id),
      table(`Tokens per request, session ${s.id}`, ['request', 'raw tokens', 'sent tokens', 'saved tokens'], rows),
    )}</div>`;
  });
  return `${head}${picker}<p class="legend"><span class="swatch dashed" style="border-color:${COLORS.raw}"></span> raw <span class="swatch" style="border-color:${COLORS.sent}"></span> sent</p>${panels.join('')}</section>`;
}

function savingsSection(f: ReportInput): string {
  const head = `<section id="savings" aria-labelledby="savings-h"><h2 id="savings-h">Savings by mechanism</h2>`;
  const saved = savedByStage(f);
  if (saved === undefined || Object.keys(saved).length === 0)
    return `${head}<p>${NOT_MEASURED}: no per-mechanism savings in these figures.</p></section>`;
  const stages = Object.entries(saved)
    .sort((a, b) => b[1] - a[1])
    .map(([s]) => s);
  const points = f.sessions.flatMap((s) => s.per_request ?? []);
  const rows = stages.map((s) => [esc(s), num(`saved_by_stage.${s}`, saved[s]!)]);
  const chart = points.length > 0 ? cumulativeSavingsChart(points, stages) : savingsByStageChart(saved);
  return `${head}${figure(
    'savings',
    'Chars saved, by mechanism',
    points.length > 0
      ? ': cumulative over every request in order, stacked; the top edge is the total saved so far.'
      : ': totals over all requests.',
    chart,
    table('Chars saved per mechanism (all requests)', ['mechanism', 'chars saved'], rows),
  )}<p class="legend">${stages.map((s, i) => `<span class="swatch" style="border-color:${STAGE_COLORS[i % STAGE_COLORS.length]}"></span> ${esc(s)}`).join(' ')}</p></section>`;
}

function costSection(f: ReportInput, card: RateCard | undefined): string {
  const head = `<section id="cost" aria-labelledby="cost-h"><h2 id="cost-h">Effective cost with prompt caching</h2>`;
  const profiles = costProfiles(f);
  const priced = card === undefined ? '' : rateCardBlock(f, card);
  if (profiles.length === 0)
    return `${head}<p>${NOT_MEASURED}: these figures carry no cache-prefix measurement (the vault does not; <code>replay</code> does).</p>${priced}</section>`;
  const withRecoveries = new Map(recoveryCostProfiles(f).map((p) => [p.name, p]));
  const rows = profiles.map((p) => {
    const r = withRecoveries.get(p.name);
    return [esc(p.name), num(p.key, p.ratio), r === undefined ? NOT_MEASURED : num(r.key, r.ratio)];
  });
  const recoveries =
    f.simulated_recoveries === undefined
      ? ''
      : `<p>With recoveries: ${num('simulated_recoveries', f.simulated_recoveries)} of the recorded actions used a line or name from an earlier tool output that their request no longer showed; in a live loop each costs a recovery round trip (the request again from cache, the page and the call at full price), which the second column adds. A ratio above 1 means the reduction cost more than it saved.</p>`;
  return `${head}${figure(
    'cost',
    'Effective cost, final over raw',
    ': cached prefix billed at the profile\u2019s cache-read price (and cache writes at its write price); below 1 is cheaper than sending the raw requests.',
    costChart(profiles),
    table(
      'Effective cost ratio by pricing profile',
      ['pricing profile', 'final / raw', 'with simulated recoveries'],
      rows,
    ),
  )}${recoveries}${f.effective_cost_raw === undefined || f.effective_cost_final === undefined ? '' : `<p>At the replay\u2019s cache-read price: raw ${num('effective_cost_raw', f.effective_cost_raw)}, final ${num('effective_cost_final', f.effective_cost_final)} (char units).</p>`}${priced}</section>`;
}

/** The tokens priced at the configured API-equivalent rate card; unmeasured kinds say so. */
function rateCardBlock(f: ReportInput, card: RateCard): string {
  const lines = priceFigures(f, card);
  const usd = (key: string, v: number | undefined): string => (v === undefined ? NOT_MEASURED : num(key, v, ' USD'));
  const rows = lines.map((l) => [
    esc(l.item),
    num(`rate_card.${l.key}_usd_per_m`, l.usdPerM),
    l.tokens === undefined ? NOT_MEASURED : num(l.key, l.tokens),
    usd(`rate_card.${l.key}_usd`, l.usd),
  ]);
  const [raw, sent] = lines;
  const saved = raw!.usd! - sent!.usd!;
  return `<div id="rate-card"><h3>At the rate card “${esc(card.label)}”</h3>${table(
    `Tokens priced at ${card.label} (USD per million tokens)`,
    ['tokens', 'USD per M', 'tokens', 'USD'],
    rows,
  )}<p>Request input at this card: ${usd('rate_card.raw_usd', raw!.usd)} raw, ${usd('rate_card.final_usd', sent!.usd)} sent, ${num('rate_card.saved_usd', saved, ' USD')} saved. An API-equivalent figure at the configured list prices, not what an OAuth or subscription plan actually charges.</p></div>`;
}

function fidelitySection(f: ReportInput): string {
  const head = `<section id="fidelity" aria-labelledby="fidelity-h"><h2 id="fidelity-h">Fidelity: what the model can still see</h2>`;
  const measured = FIDELITY_KEYS.filter((k) => f[k] !== undefined);
  const rows = FIDELITY_KEYS.map((k) => [esc(FIDELITY_LABELS[k]), opt(k, f[k], k === 'prefix_reuse' ? '' : ' %')]);
  const listTable = table('Fidelity figures (all requests)', ['figure', 'value'], rows);
  if (measured.length === 0)
    return `${head}<p>${NOT_MEASURED}: these figures carry none of ${FIDELITY_KEYS.join(', ')}.</p>${listTable}</section>`;
  const bars = measured.map((k) => ({
    label: FIDELITY_LABELS[k] + (k === 'prefix_reuse' ? ' (× 100)' : ''),
    pct: k === 'prefix_reuse' ? f[k]! * 100 : f[k]!,
  }));
  return `${head}${figure(
    'fidelity',
    'Fidelity figures',
    ': share of the task, of the agent\u2019s own actions, of diagnostic lines and of grounding strings still visible in the final requests, and how much of each request the next one reuses. 100 is everything.',
    percentBarsChart(bars, 'Fidelity figures in percent', `${measured.length} figures measured.`),
    listTable,
  )}</section>`;
}

function recoverySection(f: ReportInput, quality: QualitySummary | undefined): string {
  const head = `<section id="recovery" aria-labelledby="recovery-h"><h2 id="recovery-h">Recovery</h2>`;
  const calls = f.recovery_calls ?? quality?.savings.balanced.recovery_calls;
  const tokens = f.recovery_tokens ?? quality?.savings.balanced.recovery_tokens;
  const callsKey = f.recovery_calls === undefined ? 'quality.savings.balanced.recovery_calls' : 'recovery_calls';
  const tokensKey = f.recovery_tokens === undefined ? 'quality.savings.balanced.recovery_tokens' : 'recovery_tokens';
  const rows = [
    ['receipts delivered', opt('receipts', f.receipts)],
    ['recovered exactly', opt('recovered_exact', f.recovered_exact)],
    ['recovery failures', opt('recovery_failures', f.recovery_failures)],
    ['recovery calls by the model', opt(callsKey, calls)],
    ['tokens the recovered content cost', opt(tokensKey, tokens)],
    // Replayed under a window (`replay --window`): the requests over it and the fit's rewrites.
    ...(f.requests_over_window_raw === undefined
      ? []
      : [
          ['requests over the window, recorded', opt('requests_over_window_raw', f.requests_over_window_raw)],
          ['requests over the window, sent', opt('requests_over_window_sent', f.requests_over_window_sent)],
          ['window rewrites (cache-breaking fits)', opt('window_rewrites', f.window_rewrites)],
          [
            'requests that cannot fit (prefix + newest turn + R over W)',
            opt('requests_window_unfittable', f.requests_window_unfittable),
          ],
        ]),
  ];
  const bars = [
    ...(f.receipts === undefined ? [] : [{ label: 'receipts delivered', value: f.receipts }]),
    ...(f.recovered_exact === undefined ? [] : [{ label: 'recovered exactly', value: f.recovered_exact }]),
    ...(f.recovery_failures === undefined ? [] : [{ label: 'recovery failures', value: f.recovery_failures }]),
    ...(calls === undefined ? [] : [{ label: 'recovery calls', value: calls }]),
  ];
  const note =
    calls === undefined
      ? '<p>Replayed sessions were recorded without the recovery tool, so they hold no model recovery calls; the answer-quality harness (<code>token-terminator eval</code>) counts them and their cost.</p>'
      : '';
  const t = table('Receipts and recovery', ['figure', 'count'], rows);
  if (bars.length === 0) return `${head}<p>${NOT_MEASURED}.</p>${t}${note}</section>`;
  return `${head}${figure(
    'recovery',
    'Receipts and recovery calls',
    ': every receipt in a final request is checked by recovering its artifact exactly; failures must be 0.',
    countBarsChart(bars, 'Receipts and recovery counts', `${bars.length} counts.`, 'count'),
    t,
  )}${note}</section>`;
}

function sessionsSection(f: ReportInput): string {
  const cols: { key: string; label: string; value: (s: ReportSessionInput) => number | undefined; suffix?: string }[] =
    [
      { key: 'requests', label: 'requests', value: (s) => s.requests },
      { key: 'raw_tokens', label: 'raw tokens', value: (s) => s.raw_tokens },
      { key: 'final_tokens', label: 'sent tokens', value: (s) => s.final_tokens },
      { key: 'saved_tokens', label: 'saved tokens', value: (s) => s.raw_tokens - s.final_tokens },
      { key: 'reduction_pct', label: 'saved %', value: (s) => s.reduction_pct, suffix: ' %' },
      {
        key: 'effective_cost_ratio',
        label: 'cost ratio',
        value: (s) => (typeof s['effective_cost_ratio'] === 'number' ? s['effective_cost_ratio'] : undefined),
      },
      { key: 'receipts', label: 'receipts', value: (s) => s.receipts },
      { key: 'recovery_failures', label: 'recovery failures', value: (s) => s.recovery_failures },
      ...FIDELITY_KEYS.map((k) => ({
        key: k,
        label: FIDELITY_LABELS[k],
        value: (s: ReportSessionInput) => s[k],
        ...(k === 'prefix_reuse' ? {} : { suffix: ' %' }),
      })),
    ];
  const used = cols.filter((c) => f.sessions.some((s) => c.value(s) !== undefined) || c.key === 'saved_tokens');
  const sorted = [...f.sessions].sort(
    (a, b) => b.raw_tokens - b.final_tokens - (a.raw_tokens - a.final_tokens) || (a.id < b.id ? -1 : 1),
  );
  const headCells = used
    .map(
      (c) =>
        `<th scope="col"${c.key === 'saved_tokens' ? ' aria-sort="descending"' : ''}><button type="button" data-sort="${c.key}">${esc(c.label)}</button></th>`,
    )
    .join('');
  const body = sorted
    .map(
      (s) =>
        `<tr data-session="${esc(s.id)}"><th scope="row">${esc(s.id)}</th>${used
          .map((c) => {
            const v = c.value(s);
            return v === undefined
              ? `<td data-sort-value="">${NOT_MEASURED}</td>`
              : `<td data-sort-value="${v}">${num(c.key, v, c.suffix ?? '')}</td>`;
          })
          .join('')}</tr>`,
    )
    .join('');
  return `<section id="sessions" aria-labelledby="sessions-h"><h2 id="sessions-h">Sessions</h2>
<p>Sorted by tokens saved, largest first; select a column heading to sort by it (again to reverse).</p>
<div class="scroll"><table id="session-table"><caption>Per-session figures (${f.sessions.length} sessions)</caption><thead><tr><th scope="col"><button type="button" data-sort="id">session</button></th>${headCells}</tr></thead><tbody>${body}</tbody></table></div></section>`;
}

const CSS = `
:root{color-scheme:light;--fg:#1d1d1f;--muted:#555;--line:#d0d0d7;--bg:#fff;--accent:#1f5fbf}
*{box-sizing:border-box}
body{margin:0;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
main{max-width:1000px;margin:0 auto;padding:24px}
h1{font-size:1.7rem;margin:0 0 .25rem}h2{font-size:1.25rem;margin:2rem 0 .5rem;border-bottom:1px solid var(--line);padding-bottom:.25rem}
.lede,footer{color:var(--muted)}footer{margin-top:2.5rem;font-size:.85rem}
nav a{color:var(--accent)}
.tiles{display:grid;grid-template-columns:repeat(auto-fit,minmax(170px,1fr));gap:12px;margin:0}
.tiles div{border:1px solid var(--line);border-radius:8px;padding:10px 12px}
.tiles dt{font-size:.8rem;color:var(--muted);text-transform:uppercase;letter-spacing:.03em}
.tiles dd{margin:.2rem 0 0;font-size:1.35rem;font-weight:600}.tiles small{font-size:.8rem;font-weight:400;color:var(--muted)}
figure.chart{margin:0 0 1rem}figcaption{margin-bottom:.4rem}
figure svg{max-width:100%;height:auto;display:block}
details{margin:.4rem 0 0}summary{cursor:pointer;color:var(--accent)}
table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0}caption{text-align:left;font-weight:600;padding:.25rem 0}
th,td{border-bottom:1px solid var(--line);padding:4px 8px;text-align:right;white-space:nowrap}
th[scope=row],thead th:first-child{text-align:left}
thead th button{font:inherit;font-weight:600;background:none;border:0;padding:0;cursor:pointer;color:var(--fg)}
thead th[aria-sort=descending] button::after{content:" \\2193"}thead th[aria-sort=ascending] button::after{content:" \\2191"}
.scroll{overflow-x:auto}
.na{color:var(--muted);font-style:italic;font-weight:400}
.legend{font-size:.85rem;color:var(--muted)}
.swatch{display:inline-block;width:22px;height:0;border-top:3px solid;vertical-align:middle;margin:0 4px 0 10px}.swatch.dashed{border-top-style:dashed}
.verdict{font-size:1.2rem;font-weight:700}.verdict.good{color:#1e7b3c}.verdict.bad{color:#b3261e}.verdict.open{color:#8a5a00}
pre.rule{white-space:pre-wrap;background:#f6f6f8;border:1px solid var(--line);padding:10px;border-radius:6px;font-size:.85rem}
`;

// Plain ES2017, no globals beyond the DOM: picks the session panel, sorts the table.
const SCRIPT = `
(function () {
  var pick = document.getElementById('session-pick');
  if (pick) pick.addEventListener('change', function () {
    var panels = document.querySelectorAll('.session-panel');
    for (var i = 0; i < panels.length; i++) panels[i].hidden = String(i) !== pick.value;
  });
  var table = document.getElementById('session-table');
  if (!table) return;
  var heads = table.querySelectorAll('thead th');
  Array.prototype.forEach.call(heads, function (th, col) {
    var button = th.querySelector('button');
    if (!button) return;
    button.addEventListener('click', function () {
      var descending = th.getAttribute('aria-sort') !== 'descending';
      Array.prototype.forEach.call(heads, function (h) { h.removeAttribute('aria-sort'); });
      th.setAttribute('aria-sort', descending ? 'descending' : 'ascending');
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      var key = function (row) {
        var cell = row.cells[col];
        var v = cell.getAttribute('data-sort-value');
        if (v === null) return cell.textContent;
        return v === '' ? -Infinity : Number(v);
      };
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        var c = x < y ? -1 : x > y ? 1 : 0;
        return descending ? -c : c;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
})();
`;
