/**
 * A function tool whose string results go through the tool stream before the SDK records them.
 * Note: the run history then holds the reduced text (the vault holds the original); use only the
 * input filter when the history itself must keep originals.
 */
import type { FunctionTool } from '@openai/agents';
import { parseArgs } from '../../src/model/read.js';
import type { Terminator } from '../../src/runtime/types.js';
import { reduceToolResult } from '../shared/functions.js';
import { RECOVERY_TOOL_NAME } from '../shared/recovery.js';

/**
 * Wrap one function tool (other tool kinds are returned as they are).
 *
 * @example
 * const agent = new Agent({ name: 'coder', tools: [wrapTool(shellTool, terminator, () => 'run-1')] });
 */
export function wrapTool<T>(tool: T, terminator: Terminator, resolveSession: (context: unknown) => string): T {
  const t = tool as unknown as FunctionTool<unknown, never, unknown>;
  if (t === null || typeof t !== 'object' || t.type !== 'function' || t.name === RECOVERY_TOOL_NAME) return tool;
  const invoke: FunctionTool<unknown, never, unknown>['invoke'] = async (runContext, input, details) => {
    const out = await t.invoke(runContext, input, details);
    if (typeof out !== 'string') return out;
    const callId = details?.toolCall?.callId ?? '';
    const reduced = await reduceToolResult(
      terminator,
      { callId, name: t.name, args: parseArgs(input), content: out },
      { sessionId: resolveSession(runContext?.context) },
      details?.signal,
    );
    return reduced.content;
  };
  return { ...t, invoke } as unknown as T;
}
