/** Measurement: Python-compatible JSON sizes and token counters. */
export type { TokenCounter } from './types.js';
export {
  canonicalJson,
  serializedChars,
  serializedArrayChars,
  serializedObjectChars,
  codePoints,
  compareCodePoints,
  pythonFloatRepr,
  type CanonicalJsonOptions,
} from './canonical-json.js';
export { splitLongRuns, countGuarded, DEFAULT_MAX_RUN } from './long-runs.js';
export {
  createTiktokenCounter,
  isTiktokenEncoding,
  TIKTOKEN_ENCODINGS,
  type TiktokenEncodingName,
  type TiktokenCounterOptions,
} from './tiktoken-counter.js';
export { createTokenizerJsonCounter, type TokenizerJsonObjects, type TokenizerJsonCounterOptions } from './tokenizer-json-counter.js';
export { createRoughCounter, roughTokens } from './rough-counter.js';
export { counterForModel, encodingForModel, normalizeModelName, type CounterForModelOptions, type ModelEncoding } from './model-counter.js';
export { createCountMemo, type CountMemo, type CountMemoOptions } from './count-memo.js';
