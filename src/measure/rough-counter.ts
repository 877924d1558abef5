import type { TokenCounter } from './types.js';
import { codePoints } from './canonical-json.js';

/**
 * The rough estimate: ceil(code points / 4), i.e. Hermes' `floor((chars + 3) / 4)`. Never exact;
 * it undercounts CJK and tool-heavy prompts by 20–30 %, which is why budget fallbacks add a margin.
 *
 * @example
 * const estimate = roughTokens(text);
 */
export function roughTokens(text: string): number {
  return Math.ceil(codePoints(text) / 4);
}

/**
 * A counter that estimates tokens as ceil(code points / 4). `exact` is false.
 *
 * @example
 * const terminator = await createTerminator({ counter: createRoughCounter() });
 */
export function createRoughCounter(): TokenCounter {
  return { name: 'rough', exact: false, count: roughTokens };
}
