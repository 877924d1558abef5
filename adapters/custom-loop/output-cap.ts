/**
 * The default reader of provider output-cap errors used by the client wrappers: src/budget's
 * parser, reduced to the number a retry can use. An `upper_bound` answer (only the whole window is
 * known, the input still has to fit) is not a usable cap, so it does not trigger a retry.
 */
import { parseOutputCapError } from '../../src/budget/index.js';

/**
 * The output tokens a provider's output-cap error says are available, or undefined when the error
 * is not one or names only the whole window (no usable cap for a retry).
 *
 * @example
 * const retryCap = defaultParseOutputCapError(error); // undefined: not a cap error, do not retry
 */
export function defaultParseOutputCapError(error: unknown): number | undefined {
  const info = parseOutputCapError(error);
  if (info === undefined || info.kind === 'upper_bound') return undefined;
  return info.availableOutputTokens;
}
