/**
 * The `token_terminator` recovery tool in the three wire formats, typed as each SDK's own tool
 * type, and one call handler shared by every adapter. The session id always comes from the host:
 * a `session_id` (or any other key the schema does not declare) sent by the model is dropped
 * before the handler runs. The definitions and the handler are src/recovery's, so the wrappers,
 * the other adapters and the proxy offer and answer the tool identically.
 */
import type Anthropic from '@anthropic-ai/sdk';
import type OpenAI from 'openai';
import { lenientParameters, recoveryToolJson, type RecoveryWireFormat } from '../../src/recovery/formats.js';
import { answerRecoveryCall, recoveryArgs } from '../../src/recovery/loop.js';
import { RECOVERY_TOOL_NAME } from '../../src/recovery/schema.js';
import type { Terminator } from '../../src/runtime/types.js';

export { lenientParameters, recoveryArgs, RECOVERY_TOOL_NAME };

/** Wire format a recovery tool definition or answer is shaped for: `chat`, `responses` or `anthropic`. */
export type WireFormat = RecoveryWireFormat;

/** The definition type each format's SDK takes (type-only imports: the SDKs stay optional peers). */
export interface RecoveryToolDefinitions {
  readonly chat: OpenAI.Chat.Completions.ChatCompletionFunctionTool;
  readonly responses: OpenAI.Responses.FunctionTool;
  readonly anthropic: Anthropic.Messages.Tool;
}

/**
 * Run one recovery call for a host session. Never throws: an internal failure becomes a JSON error
 * result the model can read (class label only, no content).
 *
 * @example
 * const output = await handleRecoveryCall(terminator, call.arguments, 'session-1');
 */
export function handleRecoveryCall(terminator: Terminator, args: unknown, sessionId: string): Promise<string> {
  return answerRecoveryCall(terminator.recoveryTool, args, sessionId);
}

/**
 * The tool definition for one wire format, as that SDK's tool type. The client wrappers add it by
 * themselves whenever a request carries a receipt; pass it yourself to offer it from the start.
 *
 * @example
 * const body = { model, messages, tools: [...tools, recoveryToolDefinition(terminator, 'chat')] };
 */
export function recoveryToolDefinition<F extends WireFormat>(
  terminator: Terminator,
  format: F,
): RecoveryToolDefinitions[F] {
  return recoveryToolJson(terminator.recoveryTool, format) as unknown as RecoveryToolDefinitions[F];
}
