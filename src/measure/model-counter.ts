import type { TokenCounter } from './types.js';
import { checkEncoder, type TiktokenEncodingName } from './encoders.js';
import { createTiktokenCounter } from './tiktoken-counter.js';
import { createTokenizerJsonCounter, type TokenizerJsonObjects } from './tokenizer-json-counter.js';

/** Overrides of the tokenizer a model name would pick. */
export interface CounterForModelOptions {
  /** A tokenizer.json path or parsed objects (TOKEN_TERMINATOR_TOKENIZER_JSON); wins over all. @defaultValue none */
  readonly tokenizerJson?: string | TokenizerJsonObjects;
  /**
   * An explicit tiktoken encoding (TOKEN_TERMINATOR_TIKTOKEN_ENCODING). Wins over the model name.
   *
   * @defaultValue the model name's encoding ({@link encodingForModel})
   */
  readonly encoding?: string;
}

/** What `counterForModel` resolves a model id to. */
export interface ModelEncoding {
  readonly encoding: TiktokenEncodingName;
  /** False when the model is not a known OpenAI family (o200k_base is then only an estimate). */
  readonly exact: boolean;
}

/**
 * The bare model name: the part after the last `/` (`openai/gpt-5` → `gpt-5`), without a leading
 * alphabetic `provider:` prefix (`openai:gpt-4o` → `gpt-4o`, `ft:gpt-4o-mini:org::id` →
 * `gpt-4o-mini:org::id`), lower-cased.
 *
 * @example
 * import { normalizeModelName } from 'token-terminator';
 * normalizeModelName('openai/GPT-5'); // 'gpt-5'
 * normalizeModelName('openai:gpt-4o'); // 'gpt-4o'
 */
export function normalizeModelName(model: string): string {
  const afterSlash = model.slice(model.lastIndexOf('/') + 1).trim();
  return afterSlash.replace(/^[a-z_]+:/i, '').toLowerCase();
}

const O200K = /^(?:gpt-4o|chatgpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|gpt-oss|o[134](?:$|[-.:_])|codex-)/;
const CL100K = /^(?:gpt-4|gpt-3\.5|gpt-35|text-embedding-(?:3|ada-002))/;

/**
 * Model family → encoding. Decisions:
 * - gpt-4o, chatgpt-4o, gpt-4.1, gpt-4.5, gpt-5*, gpt-oss, o1/o3/o4*, codex-* → o200k_base, exact.
 * - gpt-4 (other), gpt-3.5/35, text-embedding-3 / ada-002 → cl100k_base, exact.
 * - no model → o200k_base, exact (the library's default encoding; the caller named nothing else).
 * - any other model (Claude, Llama, Qwen …) → o200k_base with `exact: false`: a usable estimate
 *   (closer than chars/4 for most BPE vocabularies) that stages must not treat as exact, so token
 *   gates fall back to chars and the output cap adds its fallback margin.
 *
 * @example
 * import { encodingForModel } from 'token-terminator';
 * encodingForModel('openai/gpt-4o'); // { encoding: 'o200k_base', exact: true }
 * encodingForModel('claude-sonnet-4'); // { encoding: 'o200k_base', exact: false }
 */
export function encodingForModel(model: string | undefined): ModelEncoding {
  if (model === undefined || model.trim() === '') return { encoding: 'o200k_base', exact: true };
  const name = normalizeModelName(model);
  if (O200K.test(name)) return { encoding: 'o200k_base', exact: true };
  if (CL100K.test(name)) return { encoding: 'cl100k_base', exact: true };
  return { encoding: 'o200k_base', exact: false };
}

/**
 * The counter for a route: tokenizer.json when given, else an explicit encoding, else the model
 * family's encoding (see `encodingForModel` for the mapping and what counts as exact).
 *
 * @example
 * counterForModel('openai/gpt-5').name; // 'tiktoken:o200k_base'
 * counterForModel('gpt-4').name; // 'tiktoken:cl100k_base'
 * counterForModel('claude-sonnet-4').exact; // false
 */
export function counterForModel(model?: string, options: CounterForModelOptions = {}): TokenCounter {
  if (options.tokenizerJson !== undefined && options.tokenizerJson !== '')
    return createTokenizerJsonCounter(options.tokenizerJson);
  if (options.encoding !== undefined && options.encoding !== '') {
    checkEncoder('counterForModel', options.encoding);
    return createTiktokenCounter(options.encoding as TiktokenEncodingName);
  }
  const { encoding, exact } = encodingForModel(model);
  return createTiktokenCounter(encoding, { exact });
}
