/**
 * One ToolMessage through the tool stream. The reduced text becomes the message content; the
 * original rides in `artifact` (never sent to the model) so the graph state keeps it.
 */
import { ToolMessage } from '@langchain/core/messages';
import type { Terminator } from '../../src/runtime/types.js';
import type { StepContext } from '../../src/step.js';
import { reduceToolResult } from '../shared/functions.js';
import { RECOVERY_TOOL_NAME } from '../shared/recovery.js';

/** The artifact shape written when the tool produced none of its own. */
export interface TerminatorArtifact {
  readonly token_terminator: { readonly original: string };
}

/**
 * Plain text of a message content: a string, or text-only blocks joined; undefined otherwise.
 *
 * @example
 * textContent([{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }]); // 'ab'
 */
export function textContent(content: unknown): string | undefined {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return undefined;
  const texts = (content as unknown[]).map((b) =>
    typeof b === 'string' ? b : (b as { type?: unknown }).type === 'text' ? (b as { text?: unknown }).text : undefined,
  );
  return texts.every((t) => typeof t === 'string') ? texts.join('') : undefined;
}

/**
 * Reduce a tool's message. Messages of the recovery tool, non-text contents and failures pass
 * through unchanged.
 *
 * @example
 * const shown = await reduceToolMessage(terminator, message, call.args, context, signal, true);
 */
export async function reduceToolMessage(
  terminator: Terminator,
  message: ToolMessage,
  args: Readonly<Record<string, unknown>>,
  context: StepContext,
  signal: AbortSignal | undefined,
  keepOriginal: boolean,
): Promise<ToolMessage> {
  const name = message.name ?? '';
  if (name === RECOVERY_TOOL_NAME) return message;
  const content = textContent(message.content);
  if (content === undefined) return message;
  const reduced = await reduceToolResult(
    terminator,
    { callId: message.tool_call_id, name, args, content },
    context,
    signal,
  );
  if (!reduced.changed) return message;
  const artifact: unknown =
    message.artifact !== undefined
      ? message.artifact
      : keepOriginal
        ? ({ token_terminator: { original: content } } satisfies TerminatorArtifact)
        : undefined;
  return new ToolMessage({
    content: reduced.content,
    tool_call_id: message.tool_call_id,
    ...(message.id === undefined ? {} : { id: message.id }),
    ...(message.name === undefined ? {} : { name: message.name }),
    ...(message.status === undefined ? {} : { status: message.status }),
    ...(message.metadata === undefined ? {} : { metadata: message.metadata }),
    ...(artifact === undefined ? {} : { artifact }),
  });
}
