import { readFileSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { loadOptionalPackage } from '../optional-package.js';
import type { TokenCounter } from './types.js';
import { countGuarded, DEFAULT_MAX_RUN } from './long-runs.js';

/**
 * The part of @huggingface/tokenizers we use. Its types resolve to `any` under NodeNext
 * (stack-check.md), so we pin the shape here and check results at runtime.
 */
interface HfTokenizer {
  encode(text: string, options: { add_special_tokens: boolean }): { ids: readonly number[] };
}

type HfTokenizerConstructor = new (tokenizer: object, config: object) => HfTokenizer;

/** A tokenizer.json (and optional tokenizer_config.json) already parsed. */
export interface TokenizerJsonObjects {
  readonly tokenizer: Record<string, unknown>;
  readonly config?: Record<string, unknown>;
}

/** Options of the tokenizer.json counter; every field is optional. */
export interface TokenizerJsonCounterOptions {
  /** Whether counts are exact for the route. @defaultValue true */
  readonly exact?: boolean;
  /** Longest same-class run encoded in one piece (pathological-input guard). @defaultValue 1024 */
  readonly maxRun?: number;
}

/**
 * Drop the special added tokens (`<EOT>`, `<s>` …) so their strings are counted as plain text,
 * the same rule as tiktoken's `encode_ordinary`; non-special added tokens stay.
 */
function withoutSpecialTokens(tokenizer: Record<string, unknown>): Record<string, unknown> {
  const added = tokenizer['added_tokens'];
  if (!Array.isArray(added)) return tokenizer;
  const kept = added.filter(
    (t: unknown) => !(t !== null && typeof t === 'object' && (t as { special?: unknown }).special === true),
  );
  return kept.length === added.length ? tokenizer : { ...tokenizer, added_tokens: kept };
}

function loadObjects(source: string | TokenizerJsonObjects): TokenizerJsonObjects {
  if (typeof source !== 'string') return source;
  const tokenizer = JSON.parse(readFileSync(source, 'utf8')) as Record<string, unknown>;
  const configPath = join(dirname(source), 'tokenizer_config.json');
  const config = existsSync(configPath)
    ? (JSON.parse(readFileSync(configPath, 'utf8')) as Record<string, unknown>)
    : {};
  return { tokenizer, config };
}

/**
 * A counter over a Hugging Face tokenizer.json (pure JS). Pass a path (a tokenizer_config.json
 * beside it is picked up) or the parsed objects. Special tokens are not added, and special-token
 * strings in the text count as plain text.
 *
 * @example
 * const counter = createTokenizerJsonCounter('/models/llama/tokenizer.json');
 * counter.count('hello'); // tokens under that model's tokenizer
 */
export function createTokenizerJsonCounter(
  source: string | TokenizerJsonObjects,
  options: TokenizerJsonCounterOptions = {},
): TokenCounter {
  const objects = loadObjects(source);
  if (
    objects.tokenizer === null ||
    typeof objects.tokenizer !== 'object' ||
    typeof objects.tokenizer['model'] !== 'object'
  ) {
    throw new TypeError('createTokenizerJsonCounter: not a tokenizer.json (no "model" object)');
  }
  const maxRun = options.maxRun ?? DEFAULT_MAX_RUN;
  const Ctor = loadOptionalPackage<{ Tokenizer: unknown }>('@huggingface/tokenizers')
    .Tokenizer as HfTokenizerConstructor;
  const tokenizer: HfTokenizer = new Ctor(withoutSpecialTokens(objects.tokenizer), objects.config ?? {});
  const encodeLength = (piece: string): number => {
    const ids = tokenizer.encode(piece, { add_special_tokens: false }).ids;
    if (!Array.isArray(ids)) throw new TypeError('tokenizer-json: encode() returned no ids');
    return ids.length;
  };
  return {
    name: 'tokenizer-json',
    exact: options.exact !== false,
    count(text: string): number {
      if (text.length === 0) return 0;
      return countGuarded(text, encodeLength, maxRun);
    },
  };
}
