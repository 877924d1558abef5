/**
 * The acceptance gate: the one pure function every stage uses to decide whether its candidate
 * replaces its input. A request stage measures the complete provider-visible payload; a
 * tool-result stage measures the content it replaces ({@link strictlySmaller}).
 */
import { codePoints } from './measure/index.js';
import type { TokenCounter } from './measure/types.js';

/** Token counts of the input (`raw`) and of the candidate. */
export interface TokenPair {
  readonly raw: number;
  readonly candidate: number;
}

/** What a stage proposes, measured on what it replaces. */
export interface Candidate {
  /** Size of the stage's input: serializedChars of a request, code points of a text. */
  readonly rawChars: number;
  /** Size of the candidate, measured the same way. */
  readonly candidateChars: number;
  /**
   * Token counts of both, asked for only once the chars pass; absent, or returning undefined,
   * when no counter measures them (chars decide alone).
   */
  readonly tokens?: () => TokenPair | undefined;
  /**
   * For plain text a host sends inside a JSON string, where escapes (`\n`, `\"`, `\\`) tokenize
   * differently from the text: the token counts of the JSON-escaped forms, asked for only near a
   * tie (candidate tokens ≥ 90 % of raw), which must then be strictly smaller too. Absent when the
   * token counts above are already of the serialized payload.
   */
  readonly wireTokens?: () => TokenPair;
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
 * Accept only a candidate that is strictly smaller in chars; when token counts are given,
 * strictly smaller in tokens (and, near a tie, in the tokens of its JSON-escaped wire form when
 * that is asked for); and whose every receipt names an artifact that was written and read back.
 *
 * @example
 * acceptCandidate({ rawChars: 900, candidateChars: 300, receipts: [{ artifactId: 'a_…', verified: true }] }); // accepted
 */
export function acceptCandidate(candidate: Candidate): Verdict {
  if (!(candidate.candidateChars < candidate.rawChars)) return { accepted: false, reason: 'not smaller in chars' };
  const tokens = candidate.tokens?.();
  if (tokens !== undefined) {
    if (!(tokens.candidate < tokens.raw)) return { accepted: false, reason: 'not smaller in tokens' };
    if (candidate.wireTokens !== undefined && !(tokens.candidate * 10 < tokens.raw * 9)) {
      const wire = candidate.wireTokens();
      if (!(wire.candidate < wire.raw)) return { accepted: false, reason: 'not smaller in tokens' };
    }
  }
  for (const r of candidate.receipts) if (!r.verified) return { accepted: false, reason: 'unverified receipt' };
  return ACCEPTED;
}

/**
 * {@link acceptCandidate} for a text that replaces another text a host sends inside a JSON
 * string (a tool result): strictly fewer code points and, when a counter is given, strictly fewer
 * tokens, with the JSON-escaped forms compared near a tie. Receipts are checked by the caller
 * (the artifact is vaulted and read back before the final check).
 *
 * @example
 * strictlySmaller('a long output …', 'a short view', counter); // true when both sizes shrink
 */
export function strictlySmaller(raw: string, candidate: string, counter?: TokenCounter): boolean {
  const sizes = { rawChars: codePoints(raw), candidateChars: codePoints(candidate), receipts: [] };
  if (counter === undefined) return acceptCandidate(sizes).accepted;
  return acceptCandidate({
    ...sizes,
    tokens: () => {
      const candidateTokens = counter.count(candidate);
      return { raw: counter.count(raw), candidate: candidateTokens };
    },
    wireTokens: () => {
      const candidateTokens = counter.count(JSON.stringify(candidate));
      return { raw: counter.count(JSON.stringify(raw)), candidate: candidateTokens };
    },
  }).accepted;
}
