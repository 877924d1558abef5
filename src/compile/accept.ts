/**
 * The acceptance gate: one pure function every request stage uses to decide whether its
 * candidate replaces its input. Sizes are of the complete provider-visible payload.
 */

/** What a stage proposes, measured on the complete request. */
export interface Candidate {
  /** serializedChars of the stage's input request. */
  readonly rawChars: number;
  /** serializedChars of the candidate request. */
  readonly candidateChars: number;
  /** Token counts, only when an exact counter measured both (omit both otherwise). */
  readonly rawTokens?: number;
  readonly candidateTokens?: number;
  /** Every artifact a receipt or note in the candidate names, with its write + read-back result. */
  readonly receipts: readonly { readonly artifactId: string; readonly verified: boolean }[];
}

export type Verdict =
  | { readonly accepted: true }
  | {
      readonly accepted: false;
      readonly reason: 'not smaller in chars' | 'not smaller in tokens' | 'unverified receipt';
    };

const ACCEPTED: Verdict = Object.freeze({ accepted: true });

/**
 * Accept only a candidate that is strictly smaller in chars and, when both token counts are
 * given, strictly smaller in tokens; and whose every receipt names an artifact that was written
 * and read back.
 *
 * @example
 * acceptCandidate({ rawChars: 900, candidateChars: 300, receipts: [{ artifactId: 'a_…', verified: true }] }); // accepted
 */
export function acceptCandidate(candidate: Candidate): Verdict {
  if (!(candidate.candidateChars < candidate.rawChars)) return { accepted: false, reason: 'not smaller in chars' };
  const { rawTokens, candidateTokens } = candidate;
  if (rawTokens !== undefined && candidateTokens !== undefined && !(candidateTokens < rawTokens)) {
    return { accepted: false, reason: 'not smaller in tokens' };
  }
  for (const r of candidate.receipts) if (!r.verified) return { accepted: false, reason: 'unverified receipt' };
  return ACCEPTED;
}
