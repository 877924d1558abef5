/**
 * The report's charts, drawn with Observable Plot into SVG at render time (a linkedom document
 * stands in for the browser's), so the page carries finished SVG: no script, no library and no
 * network are needed to view it. Each chart names its axes, carries an aria-label and a
 * description, and gives every mark a <title> (the browser's tooltip).
 */
import type * as PlotModule from '@observablehq/plot';
import type { parseHTML as ParseHtml } from 'linkedom';
import { loadOptionalPackage } from '../optional-package.js';
import { fmt } from './html.js';

type PlotApi = typeof PlotModule;
/** Observable Plot, required when a chart is drawn (an optional peer; Node caches the module). */
const plotApi = (): PlotApi => loadOptionalPackage<PlotApi>('@observablehq/plot');

/** Series colours: blue and orange keep their contrast for the common colour-vision deficiencies; raw is also dashed. */
export const COLORS = Object.freeze({ raw: '#6b6b6b', sent: '#1f5fbf', accent: '#d9730d' });
/** One colour per mechanism, in the order of the savings charts and their legend. */
export const STAGE_COLORS = ['#1f5fbf', '#d9730d', '#2a9d5c', '#8e44ad', '#c0392b', '#7f8c8d', '#b7950b', '#16a085'];

const WIDTH = 680;

/** A fresh document per render: Plot writes into it and nothing is shared between calls. */
type PlotDocument = NonNullable<PlotModule.PlotOptions['document']>;
interface Rendered {
  setAttribute(name: string, value: string): void;
  readonly outerHTML: string;
}

function newDocument(): PlotDocument {
  const { parseHTML } = loadOptionalPackage<{ parseHTML: typeof ParseHtml }>('linkedom');
  return parseHTML('<!doctype html><html><body></body></html>').document as unknown as PlotDocument;
}

/** Draw `options(Plot)` at the report's width into a fresh document, as SVG with its accessible name and description. */
function draw(options: (Plot: PlotApi) => PlotModule.PlotOptions, label: string, description: string): string {
  const Plot = plotApi();
  const node = Plot.plot({ document: newDocument(), width: WIDTH, ...options(Plot) }) as unknown as Rendered;
  node.setAttribute('role', 'img');
  node.setAttribute('aria-label', label);
  node.setAttribute('aria-description', description);
  return node.outerHTML;
}

/** Raw and sent tokens of each request of one session, in order. */
export function tokensPerRequestChart(
  points: readonly { raw_tokens: number; final_tokens: number }[],
  sessionId: string,
): string {
  const data = points.flatMap((p, i) => [
    { request: i + 1, series: 'raw', tokens: p.raw_tokens },
    { request: i + 1, series: 'sent', tokens: p.final_tokens },
  ]);
  return draw(
    (Plot) => ({
      height: 300,
      marginLeft: 64,
      x: { label: 'request in the session →', ...(points.length < 12 ? { ticks: points.length } : {}) },
      y: { label: '↑ tokens per request', grid: true, tickFormat: 's' },
      color: { domain: ['raw', 'sent'], range: [COLORS.raw, COLORS.sent] },
      marks: [
        Plot.ruleY([0]),
        Plot.lineY(
          data.filter((d) => d.series === 'raw'),
          { x: 'request', y: 'tokens', stroke: 'series', strokeWidth: 2, strokeDasharray: '5,3' },
        ),
        Plot.lineY(
          data.filter((d) => d.series === 'sent'),
          { x: 'request', y: 'tokens', stroke: 'series', strokeWidth: 2 },
        ),
        Plot.dot(data, {
          x: 'request',
          y: 'tokens',
          fill: 'series',
          r: points.length > 80 ? 1.5 : 3,
          title: (d: { request: number; series: string; tokens: number }) =>
            `request ${d.request}: ${fmt.format(d.tokens)} tokens ${d.series}`,
        }),
      ],
    }),
    `Tokens per request in session ${sessionId}, raw and sent`,
    `${points.length} requests; the dashed grey line is what the agent would have sent, the blue line what was sent.`,
  );
}

/** Cumulative chars saved by each mechanism over all requests in order, stacked. */
export function cumulativeSavingsChart(
  points: readonly { saved_by_stage?: Readonly<Record<string, number>> | undefined }[],
  stages: readonly string[],
): string {
  const running: Record<string, number> = Object.fromEntries(stages.map((s) => [s, 0]));
  const data: { request: number; stage: string; chars: number }[] = [];
  points.forEach((p, i) => {
    for (const s of stages) {
      running[s]! += p.saved_by_stage?.[s] ?? 0;
      data.push({ request: i + 1, stage: s, chars: running[s]! });
    }
  });
  return draw(
    (Plot) => ({
      height: 300,
      marginLeft: 64,
      x: { label: 'request (all sessions, in order) →' },
      y: { label: '↑ chars saved so far', grid: true, tickFormat: 's' },
      color: { domain: [...stages], range: STAGE_COLORS },
      marks: [
        Plot.areaY(data, { x: 'request', y: 'chars', fill: 'stage', fillOpacity: 0.85, title: 'stage' }),
        Plot.ruleY([0]),
      ],
    }),
    'Cumulative chars saved by mechanism',
    `Stacked areas, one per mechanism (${stages.join(', ')}), over ${points.length} requests.`,
  );
}

/** Chars saved per mechanism (totals only, when no per-request series exists). */
export function savingsByStageChart(saved: Readonly<Record<string, number>>): string {
  const data = Object.entries(saved)
    .sort((a, b) => b[1] - a[1])
    .map(([stage, chars]) => ({ stage, chars }));
  return draw(
    (Plot) => ({
      height: 60 + 34 * data.length,
      marginLeft: 150,
      x: { label: 'chars saved →', grid: true, tickFormat: 's' },
      y: { label: null, domain: data.map((d) => d.stage) },
      marks: [
        Plot.barX(data, {
          x: 'chars',
          y: 'stage',
          fill: COLORS.sent,
          title: (d: { stage: string; chars: number }) => `${d.stage}: ${fmt.format(d.chars)} chars`,
        }),
        Plot.ruleX([0]),
      ],
    }),
    'Chars saved by mechanism',
    `${data.length} mechanisms, largest first.`,
  );
}

/** Effective cost as a fraction of raw under each pricing profile (raw = 1). */
export function costChart(profiles: readonly { name: string; ratio: number }[]): string {
  return draw(
    (Plot) => ({
      height: 80 + 40 * profiles.length,
      marginLeft: 150,
      marginRight: 60,
      x: { label: 'effective cost, raw = 1 →', domain: [0, Math.max(1, ...profiles.map((p) => p.ratio))], grid: true },
      y: { label: null, domain: profiles.map((p) => p.name) },
      marks: [
        Plot.barX(profiles, {
          x: 'ratio',
          y: 'name',
          fill: COLORS.sent,
          title: (d: { name: string; ratio: number }) => `${d.name}: ${fmt.format(d.ratio)} of raw`,
        }),
        Plot.text(profiles, {
          x: 'ratio',
          y: 'name',
          text: (d: { ratio: number }) => fmt.format(d.ratio),
          dx: 6,
          textAnchor: 'start',
        }),
        Plot.ruleX([1], { stroke: COLORS.raw, strokeDasharray: '5,3' }),
        Plot.ruleX([0]),
      ],
    }),
    'Effective cost with prompt caching, by pricing profile',
    'Bars: the final requests\u2019 effective cost as a fraction of the raw requests\u2019; the dashed line at 1 is raw.',
  );
}

/** Horizontal bars of percentages (0–100), one per named figure. */
export function percentBarsChart(
  rows: readonly { label: string; pct: number }[],
  label: string,
  description: string,
): string {
  const bars = rows.map((r) => ({ label: r.label, value: r.pct }));
  const look = { axis: 'percent →', domain: [0, 100] as [number, number], marginRight: 60, suffix: ' %' };
  return labelledBars(bars, { ...look, fill: COLORS.sent }, label, description);
}

/** Horizontal bars of counts, one per named figure. */
export function countBarsChart(
  rows: readonly { label: string; value: number }[],
  label: string,
  description: string,
  unit: string,
): string {
  const domain: [number, number] = [0, Math.max(1, ...rows.map((r) => r.value))];
  const fill = (d: { label: string }) => (/fail|wrong/.test(d.label) ? COLORS.accent : COLORS.sent);
  return labelledBars(rows, { axis: `${unit} →`, domain, marginRight: 80, suffix: '', fill }, label, description);
}

/** One bar per row, its value written after it (with `suffix`) and in its title. */
function labelledBars(
  rows: readonly { label: string; value: number }[],
  look: {
    readonly axis: string;
    readonly domain: [number, number];
    readonly marginRight: number;
    readonly suffix: string;
    readonly fill: string | ((d: { label: string }) => string);
  },
  label: string,
  description: string,
): string {
  return draw(
    (Plot) => ({
      height: 80 + 36 * rows.length,
      marginLeft: 190,
      marginRight: look.marginRight,
      x: { label: look.axis, domain: look.domain, grid: true },
      y: { label: null, domain: rows.map((r) => r.label) },
      marks: [
        Plot.barX(rows, {
          x: 'value',
          y: 'label',
          fill: look.fill,
          title: (d: { label: string; value: number }) => `${d.label}: ${fmt.format(d.value)}${look.suffix}`,
        }),
        Plot.text(rows, {
          x: 'value',
          y: 'label',
          text: (d: { value: number }) => `${fmt.format(d.value)}${look.suffix}`,
          dx: 6,
          textAnchor: 'start',
        }),
        Plot.ruleX([0]),
      ],
    }),
    label,
    description,
  );
}
