/** Counts tokens for text. Implementations: tiktoken encodings, tokenizer.json, rough estimate, vLLM /tokenize. */
export interface TokenCounter {
  /** Stable, non-sensitive label, e.g. `tiktoken:o200k_base`, `tokenizer-json`, `rough`. */
  readonly name: string;
  /** True when counts are exact for the route (not an estimate). */
  readonly exact: boolean;
  /** Token count of plain text. Special-token strings are counted as plain text. */
  count(text: string): number;
  /** Release native resources (WASM encoders). */
  dispose?(): void;
}
