import { canonicalJson, serializedChars } from '../../measure/index.js';
import type { TokenCounter } from '../../measure/types.js';
import { firstDifference, sameData } from '../deep.js';
import { checkedRun, type InvariantOptions, InvariantViolation, type OperatorUnderTest, stagesOf } from '../harness.js';

/**
 * Output unchanged or strictly smaller: every output value deep-equals its input, or its
 * serialized size (Python-compatible canonical JSON, code points) is strictly smaller and, with
 * an exact counter, so is its token count.
 */
export function unchangedOrSmallerPredicate<T>(
  op: OperatorUnderTest<T>,
  options: InvariantOptions<T>,
): (values: readonly T[]) => Promise<void> {
  return (values) =>
    checkedRun('unchanged-or-smaller', op, options, values, (steps, result) => {
      result.outputs.forEach((out, i) =>
        checkSmaller(steps[i]!.value, out.value, `step ${i} (${stagesOf(out)})`, options.counter),
      );
    });
}

/**
 * The size check on its own, for custom harnesses. Throws an InvariantViolation.
 *
 * @example
 * import { checkSmaller } from 'token-terminator/testing';
 * checkSmaller(input, output, 'myOperator'); // throws an InvariantViolation when output grew
 */
export function checkSmaller(input: unknown, output: unknown, where: string, counter?: TokenCounter): void {
  if (sameData(input, output)) return;
  const broken = (detail: string): InvariantViolation => new InvariantViolation('unchanged-or-smaller', where, detail);
  const before = serializedChars(input);
  const after = serializedChars(output);
  const diff = firstDifference(input, output) ?? '';
  if (after >= before)
    throw broken(
      `output changed but is ${after} chars, input ${before} chars (must be unchanged or strictly smaller); first change ${diff}`,
    );
  if (counter?.exact === true) {
    const tokensBefore = counter.count(canonicalJson(input, { compact: true }));
    const tokensAfter = counter.count(canonicalJson(output, { compact: true }));
    if (tokensAfter >= tokensBefore)
      throw broken(
        `output is smaller in chars but ${tokensAfter} ${counter.name} tokens, input ${tokensBefore} (must be strictly smaller); first change ${diff}`,
      );
  }
}
