/**
 * Text-protocol agents (mini-swe-agent, SWE-agent without function calling) return command output
 * in user-role messages. Such a message is treated as a tool output only when it is recognised:
 * by the host's own mapping (a predicate an adapter passes), or by a documented, configurable
 * pattern (TOKEN_TERMINATOR_OBSERVATION_PATTERN, default in src/config/observation-pattern.ts).
 * Never by size alone, and never inside the instruction prefix (before the first assistant item).
 */
import { DEFAULT_OBSERVATION_PATTERN } from '../config/observation-pattern.js';
import { ConfigError } from '../errors.js';

/** Decides whether a user message (its text, the item, its index) carries command output. */
export type ObservationTest = (text: string, item: unknown, index: number) => boolean;

/** What an operator option may be: a pattern source, a RegExp, a predicate, or `'none'`. */
export type ObservationSetting = string | RegExp | ObservationTest;

/**
 * Build the test once (a bad pattern is a ConfigError naming the API).
 *
 * @example
 * const isOutput = observationTest('compileRequest', undefined); // the default pattern
 * isOutput('<returncode>1</returncode>\n<output>\nboom\n</output>', {}, 5); // true
 */
export function observationTest(api: string, setting: ObservationSetting | undefined): ObservationTest {
  if (typeof setting === 'function') return setting;
  if (setting === 'none') return () => false;
  let re: RegExp;
  try {
    re = setting instanceof RegExp ? setting : new RegExp(setting ?? DEFAULT_OBSERVATION_PATTERN, 'u');
  } catch {
    throw new ConfigError(`${api}: observations must be a valid regular expression, a predicate or 'none'`);
  }
  return (text) => {
    re.lastIndex = 0;
    return re.test(text);
  };
}
