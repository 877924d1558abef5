/**
 * The store behind `working_state_apply` / `working_state_get` (facts §2.10). The recovery tool only
 * routes to it; it is optional because the working-state graph is off by default
 * (TOKEN_TERMINATOR_WORKING_GRAPH_CHARS=0).
 */
export interface WorkingStateStore {
  /**
   * Validate and persist a batch atomically; the session id is the host's, recorded on the events.
   * Returns the result object (`{accepted, event_ids, counts}`); throws a TokenTerminatorError for a bad batch.
   */
  apply(sessionId: string, operations: readonly Readonly<Record<string, unknown>>[]): Promise<Readonly<Record<string, unknown>>>;
  /** Current state of the session (`{nodes: {id: node}, edges: {id: edge}}`), at most `limit` nodes. */
  get(sessionId: string, options: { readonly includeRetired: boolean; readonly limit: number }): Promise<Readonly<Record<string, unknown>>>;
}
