/**
 * The `token_terminator` recovery tool as a LangChain tool. The session id comes from the run's
 * `configurable.thread_id` (or the adapter's option), never from the model's arguments.
 */
import { tool, type StructuredToolInterface } from '@langchain/core/tools';
import type { Terminator } from '../../src/runtime/types.js';
import { handleRecoveryCall, lenientParameters } from '../shared/recovery.js';
import { sessionResolver, type LangGraphRunOptions } from './run-context.js';

/**
 * The `token_terminator` recovery tool as a LangChain tool, answering for the session of the run it is called in.
 *
 * @example
 * const agent = createReactAgent({ llm, tools: [...tools, langchainRecoveryTool(terminator)] });
 */
export function langchainRecoveryTool(
  terminator: Terminator,
  options: LangGraphRunOptions = {},
  resolveSession: (configurable: unknown) => string = sessionResolver(options),
): StructuredToolInterface {
  const def = terminator.recoveryTool;
  const schema = lenientParameters(def);
  return tool(
    async (input: unknown, config?: { configurable?: unknown }) =>
      handleRecoveryCall(terminator, input, resolveSession(config?.configurable)),
    { name: def.name, description: def.description, schema: schema as never },
  ) as unknown as StructuredToolInterface;
}
