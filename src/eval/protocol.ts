/**
 * The precommitted protocol of the answer-quality harness: fixed before the first request, written
 * into the results and printed with them. Changing a number here is changing the experiment.
 */
import { exactNonInferiorityP, mcnemarHarmP, tangoZ } from './stats.js';

/** The checkpoint and the precommitted final size, in matched pairs. */
export const CHECKPOINT_PAIRS = 36;
export const FINAL_PAIRS = 72;
/** Default non-inferiority margin on accuracy (p_off − p_balanced), absolute. */
export const DEFAULT_MARGIN = 0.1;
/** One-sided level of the non-inferiority test (final look only). */
export const ALPHA = 0.05;
/** One-sided level of the harm test at each of the two looks (0.05 split over the looks). */
export const ALPHA_HARM = 0.025;

export type Verdict = 'non-inferior' | 'inferior' | 'inconclusive' | 'withheld';

/** The decision rule as printed before running and with the result. */
export function decisionRule(margin: number): string {
  const pct = (x: number): string => `${Math.round(x * 1000) / 10}`;
  return [
    'Decision rule (fixed before the first request):',
    `- Each arm's final answer is graded correct or wrong by exact match with the planted fact.`,
    `- b = pairs where off is correct and balanced is wrong; c = the reverse; n = pairs.`,
    `- Harm, at ${CHECKPOINT_PAIRS} and at ${FINAL_PAIRS} pairs: exact one-sided McNemar test on the b + c discordant pairs,`,
    `  p = P(X >= b), X ~ Binomial(b + c, 1/2). p <= ${ALPHA_HARM} -> "inferior" (the run stops).`,
    `- Non-inferiority, only at ${FINAL_PAIRS} pairs: H0 p_off - p_balanced >= ${pct(margin)} points against H1 < ${pct(margin)} points;`,
    `  Tango's score statistic with its exact unconditional p-value. p <= ${ALPHA} -> "non-inferior", else "inconclusive".`,
    `- At ${CHECKPOINT_PAIRS} pairs without harm the decision is "withheld" until the precommitted ${FINAL_PAIRS} pairs are complete.`,
    '- Token savings are reported after the verdict and cannot change it.',
  ].join('\n');
}

/** One look at the data. */
export interface Analysis {
  readonly pairs: number;
  readonly off_correct: number;
  readonly balanced_correct: number;
  /** Pairs where only off is correct. */
  readonly b: number;
  /** Pairs where only balanced is correct. */
  readonly c: number;
  readonly off_accuracy: number;
  readonly balanced_accuracy: number;
  readonly margin: number;
  readonly harm_p: number;
  readonly tango_z: number;
  readonly noninferiority_p: number;
  readonly verdict: Verdict;
}

/** Analyse `outcomes` (off correct, balanced correct) per pair at a look of `planned` pairs. */
export function analyse(
  outcomes: readonly (readonly [boolean, boolean])[],
  margin: number,
  finalLook: boolean,
): Analysis {
  const n = outcomes.length;
  let b = 0;
  let c = 0;
  let off = 0;
  let bal = 0;
  for (const [o, l] of outcomes) {
    if (o) off++;
    if (l) bal++;
    if (o && !l) b++;
    if (!o && l) c++;
  }
  const harm = mcnemarHarmP(b, c);
  const ni = n === 0 ? 1 : exactNonInferiorityP(b, c, n, margin);
  const verdict: Verdict =
    harm <= ALPHA_HARM ? 'inferior' : !finalLook ? 'withheld' : ni <= ALPHA ? 'non-inferior' : 'inconclusive';
  const r4 = (x: number): number => Math.round(x * 1e4) / 1e4;
  return {
    pairs: n,
    off_correct: off,
    balanced_correct: bal,
    b,
    c,
    off_accuracy: n === 0 ? 0 : r4(off / n),
    balanced_accuracy: n === 0 ? 0 : r4(bal / n),
    margin,
    harm_p: r4(harm),
    tango_z: r4(n === 0 ? 0 : tangoZ(b, c, n, margin)),
    noninferiority_p: r4(ni),
    verdict,
  };
}
