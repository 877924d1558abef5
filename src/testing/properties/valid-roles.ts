import type { ProviderRequest } from '../../step.js';
import { requestFormat, roleProblems } from '../format.js';
import { checkedRun, type InvariantOptions, InvariantViolation, type OperatorUnderTest, stagesOf } from '../harness.js';

/**
 * Valid roles for the format: no output request has a role problem its input did not have
 * (Chat tool messages answer the preceding assistant tool calls, no new adjacent user messages;
 * Responses outputs follow their calls; Anthropic alternates and answers every tool_use in the
 * next user message). The format is read from the input request.
 */
export function validRolesPredicate(
  op: OperatorUnderTest<ProviderRequest>,
  options: InvariantOptions<ProviderRequest>,
): (values: readonly ProviderRequest[]) => Promise<void> {
  return (values) =>
    checkedRun('valid-roles', op, options, values, (steps, result) => {
      result.outputs.forEach((out, i) => {
        const format = requestFormat(steps[i]!.value);
        const before = new Set(roleProblems(steps[i]!.value, format));
        const added = roleProblems(out.value, format).filter((p) => !before.has(p));
        if (added.length > 0)
          throw new InvariantViolation(
            'valid-roles',
            `request ${i} (${format ?? 'unknown format'}, ${stagesOf(out)})`,
            added.join('; '),
          );
      });
    });
}
