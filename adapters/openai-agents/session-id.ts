/** Where an Agents SDK run's session id comes from: the host's run context, never the model. */
import { randomUUID } from 'node:crypto';

/** How the Agents adapter names the session of a run. */
export interface AgentsSessionOptions {
  /**
   * Session id for a run context (the `context` passed to `run()`), fixed or computed from it.
   *
   * @defaultValue `context.sessionId` when it is a non-empty string, else one random id per adapter instance
   */
  readonly sessionId?: string | ((context: unknown) => string | undefined);
}

/**
 * The session id of a run context: `options.sessionId` (fixed or computed), else `context.sessionId`, else one random id per resolver.
 *
 * @example
 * const resolveSession = agentsSessionResolver({ sessionId: 'chat-42' });
 */
export function agentsSessionResolver(options: AgentsSessionOptions): (context: unknown) => string {
  const fallback = `openai-agents:${randomUUID()}`;
  return (context) => {
    if (typeof options.sessionId === 'string') return options.sessionId;
    const custom = options.sessionId?.(context);
    if (custom !== undefined && custom !== '') return custom;
    const own =
      context !== null && typeof context === 'object' ? (context as { sessionId?: unknown }).sessionId : undefined;
    return typeof own === 'string' && own !== '' ? own : fallback;
  };
}
