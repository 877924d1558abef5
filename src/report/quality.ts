/**
 * The report's answer-quality section: the verdict of a `token-terminator eval` run first, with
 * the precommitted rule and the look it came from, then the accuracies and discordant pairs, then
 * (second, as the protocol demands) the tokens each arm spent and the recovery calls.
 */
import { z } from 'zod';
import type { EvalResults } from '../eval/run.js';
import { countBarsChart, percentBarsChart } from './charts.js';
import { ReportInputError } from './figures.js';
import { esc, num } from './html.js';

/** The results file of a `token-terminator eval` run, as the answer-quality section reads it. */
export type QualitySummary = EvalResults;
/** HTML id of the answer-quality section (the report's navigation links to it). */
export const QUALITY_SECTION_ID = 'quality';

const analysis = z.looseObject({
  pairs: z.number(),
  off_correct: z.number(),
  balanced_correct: z.number(),
  b: z.number(),
  c: z.number(),
  off_accuracy: z.number(),
  balanced_accuracy: z.number(),
  harm_p: z.number(),
  noninferiority_p: z.number(),
  verdict: z.string(),
});
const totals = z.looseObject({
  prompt_tokens: z.number(),
  completion_tokens: z.number(),
  requests: z.number(),
  recovery_calls: z.number(),
  recovery_tokens: z.number(),
});
const results = z.looseObject({
  harness: z.literal('token-terminator eval'),
  protocol: z.looseObject({
    seed: z.number(),
    planned_pairs: z.number(),
    margin: z.number(),
    rule: z.string(),
    model: z.string(),
  }),
  status: z.string(),
  verdict: z.string(),
  checkpoint: analysis.optional(),
  final: analysis.optional(),
  pairs: z.array(z.unknown()),
  savings: z.looseObject({ off: totals, balanced: totals, prompt_tokens_saved_pct: z.number() }),
});

/**
 * Validate parsed JSON as `eval --out` results.
 *
 * @example
 * const quality = parseQualityResults(JSON.parse(await readFile('eval.json', 'utf8')));
 */
export function parseQualityResults(value: unknown): QualitySummary {
  const parsed = results.safeParse(value);
  if (parsed.success) return parsed.data as unknown as QualitySummary;
  const issue = parsed.error.issues[0]!;
  throw new ReportInputError(
    `not eval results (token-terminator eval --out): ${issue.path.length === 0 ? 'the top level' : issue.path.join('.')}: ${issue.message}`,
  );
}

/**
 * The answer-quality section as an HTML fragment: verdict, decision rule, accuracies and discordant pairs, then tokens and recovery calls.
 *
 * @example
 * const html = renderQuality(parseQualityResults(JSON.parse(text)));
 */
export function renderQuality(q: QualitySummary): string {
  const look = q.final ?? q.checkpoint;
  const tone = q.verdict === 'non-inferior' ? 'good' : q.verdict === 'inferior' ? 'bad' : 'open';
  const head = `<section id="${QUALITY_SECTION_ID}" aria-labelledby="quality-h"><h2 id="quality-h">Answer quality (paired A/B: off vs balanced)</h2>`;
  const verdict = `<p class="verdict ${tone}" data-key="quality.verdict">${esc(q.verdict)}</p><p>${q.pairs.length} of ${q.protocol.planned_pairs} planned pairs, model ${esc(q.protocol.model)}, seed ${num('quality.protocol.seed', q.protocol.seed)}, status ${esc(q.status)}.</p>`;
  const rule = `<details><summary>The decision rule, fixed before the first request</summary><pre class="rule">${esc(q.protocol.rule)}</pre></details>`;
  if (look === undefined)
    return `${head}${verdict}<p>Fewer pairs than the ${36}-pair checkpoint: no analysis yet.</p>${rule}</section>`;
  const acc = [
    { label: 'off: correct answers', pct: look.off_accuracy * 100 },
    { label: 'balanced: correct answers', pct: look.balanced_accuracy * 100 },
  ];
  const rows = [
    ['pairs analysed', num('quality.pairs', look.pairs)],
    ['off correct', num('quality.off_correct', look.off_correct)],
    ['balanced correct', num('quality.balanced_correct', look.balanced_correct)],
    ['only off correct (b)', num('quality.b', look.b)],
    ['only balanced correct (c)', num('quality.c', look.c)],
    ['harm p (exact McNemar)', num('quality.harm_p', look.harm_p)],
    ['non-inferiority p (exact)', num('quality.noninferiority_p', look.noninferiority_p)],
  ];
  const s = q.savings;
  const spend = [
    { label: 'off: prompt tokens', value: s.off.prompt_tokens },
    { label: 'balanced: prompt tokens', value: s.balanced.prompt_tokens },
    { label: 'balanced: recovery tokens', value: s.balanced.recovery_tokens },
  ];
  const table = (caption: string, body: string[][]): string =>
    `<table><caption>${esc(caption)}</caption><tbody>${body.map(([k, v]) => `<tr><th scope="row">${esc(k!)}</th><td>${v}</td></tr>`).join('')}</tbody></table>`;
  return `${head}${verdict}${rule}
<figure class="chart" aria-labelledby="quality-acc-cap"><figcaption id="quality-acc-cap"><strong>Accuracy per arm</strong> over the ${look.pairs} pairs of the ${q.final === undefined ? 'checkpoint' : 'final'} look.</figcaption>
${percentBarsChart(acc, 'Share of correct answers per arm', 'Two bars: off and balanced.')}
<details><summary>Data table: accuracy and tests</summary>${table('Paired outcomes and tests', rows)}</details></figure>
<h3>Savings (second: they cannot change the verdict)</h3>
<figure class="chart" aria-labelledby="quality-spend-cap"><figcaption id="quality-spend-cap"><strong>Tokens spent per arm</strong>, all pairs; balanced prompt tokens include what recovery added.</figcaption>
${countBarsChart(spend, 'Prompt tokens per arm and recovery tokens', 'Three bars.', 'tokens')}
<details><summary>Data table: tokens per arm</summary>${table('Tokens per arm', [
    ['off prompt tokens', num('quality.savings.off.prompt_tokens', s.off.prompt_tokens)],
    ['balanced prompt tokens', num('quality.savings.balanced.prompt_tokens', s.balanced.prompt_tokens)],
    ['prompt tokens saved', num('quality.savings.prompt_tokens_saved_pct', s.prompt_tokens_saved_pct, ' %')],
    ['balanced recovery calls', num('quality.savings.balanced.recovery_calls', s.balanced.recovery_calls)],
    ['balanced recovery tokens', num('quality.savings.balanced.recovery_tokens', s.balanced.recovery_tokens)],
  ])}</details></figure></section>`;
}
