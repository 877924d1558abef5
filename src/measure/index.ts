/** Measurement: Python-compatible JSON sizes and token counters. */
export type { RecordedCount, RecordingCounter, TokenCounter } from './types.js';
export type { CopiedRun, PieceRecord } from './pieces.js';
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
export { createTiktokenCounter, DEFAULT_ENGINES, type TiktokenCounterOptions } from './tiktoken-counter.js';
export {
  acquireEncoder,
  ENCODER_ENGINES,
  isTiktokenEncoding,
  loadedEncoders,
  TIKTOKEN_ENCODINGS,
  type EncoderEngine,
  type EncoderLease,
  type TiktokenEncodingName,
} from './encoders.js';
export {
  createTokenizerJsonCounter,
  type TokenizerJsonObjects,
  type TokenizerJsonCounterOptions,
} from './tokenizer-json-counter.js';
export { createRoughCounter, roughTokens } from './rough-counter.js';
export {
  counterForModel,
  encodingForModel,
  normalizeModelName,
  type CounterForModelOptions,
  type ModelEncoding,
} from './model-counter.js';
