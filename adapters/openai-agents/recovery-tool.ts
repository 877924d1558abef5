/** The `token_terminator` recovery tool as an Agents SDK function tool (session id from the run context). */
import { tool, type FunctionTool } from '@openai/agents';
import type { Terminator } from '../../src/runtime/types.js';
import { handleRecoveryCall, lenientParameters } from '../shared/recovery.js';

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
  const lenient = lenientParameters(def);
  const parameters = {
    ...lenient,
    required: (lenient['required'] as string[] | undefined) ?? [],
    additionalProperties: true,
  };
  return tool({
    name: def.name,
    description: def.description,
    parameters: parameters as never,
    strict: false,
    execute: async (input: unknown, runContext) =>
      handleRecoveryCall(terminator, input, resolveSession(runContext?.context)),
  }) as unknown as FunctionTool<unknown, never, string>;
}
