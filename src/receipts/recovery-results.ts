/**
 * Telling the recovery tool's own results apart from host tool outputs. A result is evidence the
 * model asked for, byte for byte: a request stage that leased, collapsed, viewed or receipted it
 * would take back what the model just recovered (and the gateway, which shows each recovered
 * exchange again, would change its prompt prefix). So every request stage leaves them alone.
 *
 * Recognised by the tool name the output's call resolves to, or, when the call is not in the
 * request (a Responses request chained with `previous_response_id` carries only the output), by
 * the result's own shape: compact canonical JSON that opens with an artifact id (artifact_get,
 * artifact_peek, artifact_find) or with search results; host tools do not answer in that form.
 */
import type { Slot } from '../model/types.js';
import { RECOVERY_TOOL_NAME } from './index.js';

const RESULT_SHAPE = /^\{"(?:artifact_id":"a_[0-9a-f]{32}|results":\[(?:\{"artifact_id":"a_[0-9a-f]{32}|\]))/;

function textOf(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (Array.isArray(value) && value.length === 1) {
    const part = value[0] as { text?: unknown } | null;
    if (part !== null && typeof part === 'object' && typeof part.text === 'string') return part.text;
  }
  return undefined;
}

/**
 * True for a tool output the `token_terminator` recovery tool produced.
 *
 * @example
 * const managed = view.slots.filter((s) => s.kind === 'tool_output' && !isRecoveryResult(s));
 */
export function isRecoveryResult(slot: Pick<Slot, 'toolName' | 'value'>): boolean {
  if (slot.toolName === RECOVERY_TOOL_NAME) return true;
  const text = textOf(slot.value);
  // The shape opens with '{': most outputs are told apart by their first character.
  return text !== undefined && text.charCodeAt(0) === 123 && RESULT_SHAPE.test(text.slice(0, 120));
}
