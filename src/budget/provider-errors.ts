/**
 * Output-cap errors from providers → how much output would fit, so a custom loop can retry once
 * with a correct cap instead of compressing history in a loop (hermes-agent#38652 and its kin).
 * Wordings are the real ones collected in test/fixtures/provider-errors.
 */

/** What a provider said about the output budget. */
export interface OutputCapInfo {
  /** The largest output cap the provider would accept for this request (> 0). */
  readonly availableOutputTokens: number;
  /** The context length the provider reported, when it did. */
  readonly contextLength?: number;
  /**
   * `remaining`: context − input, this request only. `model_limit`: the model's own output ceiling.
   * `upper_bound`: only the whole window is known (vLLM max_model_len); the input still has to fit.
   */
  readonly kind: 'remaining' | 'model_limit' | 'upper_bound';
}

const NUM = String.raw`(\d[\d,_]*)`;
const num = (s: string | undefined): number => Number((s ?? '').replace(/[,_]/g, ''));
const CAP = String.raw`max_(?:completion_|output_|new_)?tokens`;

/** Wordings (regular expression sources, case-insensitive), and what the first that matches says would fit. */
type Rule = readonly [
  sources: readonly string[],
  read: (m: RegExpExecArray, text: string) => OutputCapInfo | undefined,
];

const remaining = (context: number, input: number): OutputCapInfo => ({
  availableOutputTokens: context - input,
  contextLength: context,
  kind: 'remaining',
});

const RULES: readonly Rule[] = [
  // OpenAI / OpenRouter / Nous: "maximum context length is N tokens … (X of text input, Y of tool input, Z in the output)"
  [
    [String.raw`maximum context length is ${NUM} tokens`],
    (ctx, t) => {
      const group = /\(([^()]*?\bin the output)\)/i.exec(t);
      if (group === null) return undefined;
      let input = 0;
      for (const m of (group[1] ?? '').matchAll(new RegExp(String.raw`${NUM} of [a-z ]*?input`, 'gi')))
        input += num(m[1]);
      return remaining(num(ctx[1]), input);
    },
  ],
  // vLLM, oldest to newest: "maximum context length is N tokens. However, you requested T tokens (X in the
  // messages, Y in the completion)", "… your prompt contains at least Y input tokens", "'max_tokens' or
  // 'max_completion_tokens' is too large: X. This model's maximum context length is C tokens and your request
  // has I input tokens (X > C - I)"
  [
    [
      String.raw`maximum context length is ${NUM} tokens[\s\S]*?\(${NUM} in the messages, ${NUM} in the completion\)`,
      String.raw`maximum context length is ${NUM} tokens[\s\S]*?prompt contains (?:at least )?${NUM} input tokens`,
      String.raw`maximum context length is\s+${NUM}\s+tokens and your request has\s+${NUM}\s+input tokens`,
    ],
    (m) => remaining(num(m[1]), num(m[2])),
  ],
  // Anthropic-style: "max_tokens: X > context_window: C - input_tokens: I = available_tokens: N" (also "available_tokens=N")
  [
    [String.raw`available_tokens\s*[:=]\s*${NUM}`],
    (m, t) => {
      const ctx = new RegExp(String.raw`context_window\s*[:=]\s*${NUM}`, 'i').exec(t);
      const out = { availableOutputTokens: num(m[1]), kind: 'remaining' as const };
      return ctx === null ? out : { ...out, contextLength: num(ctx[1]) };
    },
  ],
  // Anthropic: "input length and `max_tokens` exceed context limit: I + X > C"
  [[String.raw`exceed context limit:\s*${NUM}\s*\+\s*${NUM}\s*>\s*${NUM}`], (m) => remaining(num(m[3]), num(m[1]))],
  // vLLM: "max_tokens=X cannot be greater than max_model_len=max_total_tokens=N"
  [
    [String.raw`${CAP}\s*=\s*${NUM} cannot be greater than max_model_len\s*=\s*(?:[a-z_]+\s*=\s*)*${NUM}`],
    (m) => ({ availableOutputTokens: num(m[2]), contextLength: num(m[2]), kind: 'upper_bound' }),
  ],
  // Gemini on Vertex AI: "maxOutputTokens value of X but the supported range is from 1 (inclusive) to N (exclusive)"
  [
    [
      String.raw`maxOutputTokens value of ${NUM} but the supported range is from 1 \(inclusive\) to ${NUM} \(exclusive\)`,
    ],
    (m) => ({ availableOutputTokens: num(m[2]) - 1, kind: 'model_limit' }),
  ],
  // Model output ceilings: OpenAI "max_tokens is too large: X. This model supports at most N
  // completion tokens", DashScope "Range of max_tokens should be [1, N]", DeepSeek "valid range of
  // max_tokens is [1, N]", "exceeds model's maximum output tokens (N)", Anthropic "X > N, which is
  // the maximum allowed number of output tokens", Volcengine / OpenAI "… expected a value <= N",
  // Groq "max_tokens [for `model`] must be less than or equal to `N`".
  [
    [
      String.raw`${CAP}'? is too large: \d[\d,_]*\.\s*This model supports at most ${NUM} (?:completion|output) tokens`,
      String.raw`${CAP}\`?(?: for \`[^\`\n]{1,120}\`)? must be less than or equal to \`?${NUM}`,
      String.raw`range of ${CAP} (?:should be|is)\s*\[\s*1\s*,\s*${NUM}\s*\]`,
      String.raw`exceeds (?:the )?model'?s maximum output tokens \(${NUM}\)`,
      String.raw`${CAP}:\s*\d+\s*>\s*${NUM},\s*which\s+is\s+the\s+maximum\s+allowed\s+number\s+of\s+output\s+tokens`,
      String.raw`${CAP}[^\n]{0,120}?expected a value <= ${NUM}`,
    ],
    (m) => ({ availableOutputTokens: num(m[1]), kind: 'model_limit' }),
  ],
];
/** Each rule's wordings compiled once. */
const COMPILED = RULES.map(([sources, read]) => [sources.map((source) => new RegExp(source, 'i')), read] as const);

const MAX_TEXT = 64 * 1024;

/** The strings worth reading in an error: message, body, nested provider error objects, causes. */
function textsOf(input: unknown, depth = 0, out: string[] = [], seen = new Set<object>()): string[] {
  if (out.length > 32 || depth > 5) return out;
  if (typeof input === 'string') {
    out.push(input.length > MAX_TEXT ? input.slice(0, MAX_TEXT) : input);
    return out;
  }
  if (input === null || typeof input !== 'object' || seen.has(input)) return out;
  seen.add(input);
  if (input instanceof Error) {
    textsOf(input.message, depth + 1, out, seen);
    for (const key of ['error', 'body', 'response', 'data', 'cause'] as const)
      textsOf((input as unknown as Record<string, unknown>)[key], depth + 1, out, seen);
    return out;
  }
  for (const value of Object.values(input)) textsOf(value, depth + 1, out, seen);
  return out;
}

/**
 * Parse a provider's output-cap error (text, Error, or the SDK's error object) into the output that
 * would fit. Returns undefined for anything else — including input overflows with no room left
 * (available ≤ 0) and wordings that give the prompt in characters, not tokens.
 *
 * @example
 * parseOutputCapError("maximum context length is 256000 tokens. However, you requested about 281093 tokens (5683 of text input, 13410 of tool input, 262000 in the output).");
 * // → { availableOutputTokens: 236907, contextLength: 256000, kind: 'remaining' }
 */
export function parseOutputCapError(error: unknown): OutputCapInfo | undefined {
  for (const text of textsOf(error)) {
    for (const [patterns, read] of COMPILED) {
      const m = patterns.map((p) => p.exec(text)).find((found) => found !== null);
      const info = m === undefined || m === null ? undefined : read(m, text);
      if (info === undefined) continue;
      if (!(info.availableOutputTokens > 0) || !Number.isSafeInteger(info.availableOutputTokens)) return undefined;
      return info;
    }
  }
  return undefined;
}
