import type { ProviderRequest } from '../../step.js';
import { requestFormat, roleProblems } from '../format.js';
import { baseDeps, build, checkRun, InvariantViolation, makeSteps, runSteps, stagesOf, type InvariantOptions, type OperatorUnderTest } from '../harness.js';

/**
 * Valid roles for the format: no output request has a role problem its input did not have
 * (Chat tool messages answer the preceding assistant tool calls, no new adjacent user messages;
 * Responses outputs follow their calls; Anthropic alternates and answers every tool_use in the
 * next user message). The format is read from the input request.
 */
export function validRolesPredicate(op: OperatorUnderTest<ProviderRequest>, options: InvariantOptions<ProviderRequest>): (values: readonly ProviderRequest[]) => Promise<void> {
  return async (values) => {
    const deps = baseDeps(options as InvariantOptions<unknown>);
    const { operator, dispose } = await build(op, deps);
    try {
      const steps = makeSteps(structuredClone(values) as ProviderRequest[], options.context);
      const result = await runSteps(operator, steps, options.timeoutMs);
      checkRun('valid-roles', result, steps);
      result.outputs.forEach((out, i) => {
        const format = requestFormat(steps[i]!.value);
        const before = new Set(roleProblems(steps[i]!.value, format));
        const added = roleProblems(out.value, format).filter((p) => !before.has(p));
        if (added.length > 0) throw new InvariantViolation('valid-roles', `request ${i} (${format ?? 'unknown format'}, ${stagesOf(out)})`, added.join('; '));
      });
    } finally {
      await dispose();
      deps.probe.dispose();
    }
  };
}
