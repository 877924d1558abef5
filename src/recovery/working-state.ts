/**
 * The store behind `working_state_apply` / `working_state_get` is a port of the
 * vault (`Vault.workingState`, src/vault/ports.ts). The recovery tool only routes to it; it is
 * optional because the working-state graph is off by default (TOKEN_TERMINATOR_WORKING_GRAPH_CHARS=0).
 */
export type { WorkingStateStore } from '../vault/ports.js';
