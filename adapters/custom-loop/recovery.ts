/**
 * The `token_terminator` recovery tool in the three wire formats, and one call handler shared by
 * every adapter. The session id always comes from the host: a `session_id` (or any other key the
 * schema does not declare) sent by the model is dropped before the handler runs.
 */
import type { RecoveryTool, Terminator } from '../../src/runtime-types.js';
import { errorLabel } from '../../src/step.js';

export type WireFormat = 'chat' | 'responses' | 'anthropic';

/** The tool's name as the model sees it. */
export const RECOVERY_TOOL_NAME = 'token_terminator';

/** The argument schema without `additionalProperties: false`, so a spoofed key is dropped rather than rejected. */
export function lenientParameters(tool: RecoveryTool): Record<string, unknown> {
  const { additionalProperties: _ignored, ...rest } = tool.parameters as Record<string, unknown>;
  return rest;
}

/** Parse (when a JSON string) and keep only the keys the schema declares. */
export function recoveryArgs(tool: RecoveryTool, args: unknown): Record<string, unknown> {
  let value = args;
  if (typeof value === 'string') {
    try {
      value = value.trim() === '' ? {} : (JSON.parse(value) as unknown);
    } catch {
      return {};
    }
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return {};
  const properties = (tool.parameters as { properties?: Record<string, unknown> }).properties;
  const allowed = properties === undefined ? undefined : new Set(Object.keys(properties));
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value as Record<string, unknown>)) {
    if (key === 'session_id' || key === 'sessionId') continue;
    if (allowed === undefined || allowed.has(key)) out[key] = v;
  }
  return out;
}

/**
 * Run one recovery call for a host session. Never throws: an internal failure becomes a JSON error
 * result the model can read (class label only, no content).
 */
export async function handleRecoveryCall(terminator: Terminator, args: unknown, sessionId: string): Promise<string> {
  const tool = terminator.recoveryTool;
  try {
    return await tool.handle(recoveryArgs(tool, args), { sessionId });
  } catch (error) {
    return JSON.stringify({ error: 'recovery failed', error_type: errorLabel(error) });
  }
}

/**
 * The tool definition for one wire format.
 *
 * @example
 * const body = { model, messages, tools: [...tools, recoveryToolDefinition(terminator, 'chat')] };
 */
export function recoveryToolDefinition(terminator: Terminator, format: WireFormat): Record<string, unknown> {
  const tool = terminator.recoveryTool;
  const parameters = lenientParameters(tool);
  switch (format) {
    case 'chat':
      return { type: 'function', function: { name: tool.name, description: tool.description, parameters } };
    case 'responses':
      return { type: 'function', name: tool.name, description: tool.description, parameters, strict: false };
    case 'anthropic':
      return { name: tool.name, description: tool.description, input_schema: parameters };
  }
}
