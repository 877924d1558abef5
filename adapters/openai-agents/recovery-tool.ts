/** The `token_terminator` recovery tool as an Agents SDK function tool (session id from the run context). */
import { tool, type FunctionTool } from '@openai/agents';
import type { Terminator } from '../../src/runtime/types.js';
import { handleRecoveryCall, lenientParameters } from '../shared/recovery.js';

/** The recovery tool's parameters as the Agents SDK takes a non-strict tool's: every field optional, extra ones allowed. */
export function agentsParameters(terminator: Terminator): Record<string, unknown> {
  const lenient = lenientParameters(terminator.recoveryTool);
  return { ...lenient, required: (lenient['required'] as string[] | undefined) ?? [], additionalProperties: true };
}

/**
 * The `token_terminator` recovery tool as an Agents SDK function tool, answering for the session `resolveSession` gives each run context.
 *
 * @example
 * const agent = new Agent({ name: 'coder', tools: [agentsRecoveryTool(terminator, () => 'run-1')] });
 */
export function agentsRecoveryTool(
  terminator: Terminator,
  resolveSession: (context: unknown) => string,
): FunctionTool<unknown, never, string> {
  const def = terminator.recoveryTool;
  return tool({
    name: def.name,
    description: def.description,
    parameters: agentsParameters(terminator) as never,
    strict: false,
    execute: async (input: unknown, runContext) =>
      handleRecoveryCall(terminator, input, resolveSession(runContext?.context)),
  }) as unknown as FunctionTool<unknown, never, string>;
}
