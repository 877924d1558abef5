/**
 * The stage ids every Decision carries, one per operator and spelled as its export (plus one
 * mechanism credited on its own). Vaults written
 * before the ids were unified hold three older snake_case ids; `stageId` reads them as today's.
 */
export const STAGES = {
  rewriteTerminalCommand: 'rewriteTerminalCommand',
  deltaRepeatedOutput: 'deltaRepeatedOutput',
  compressToolResult: 'compressToolResult',
  collapseDuplicates: 'collapseDuplicates',
  routeSkills: 'routeSkills',
  compileRequest: 'compileRequest',
  fitWindow: 'fitWindow',
  capOutputBudget: 'capOutputBudget',
  /**
   * Not an operator: the bounded views collapseDuplicates shows of outputs over the inline limit,
   * credited apart from the duplicates it collapses (a view saves without anything being duplicated).
   */
  boundedView: 'boundedView',
} as const;

export type StageId = (typeof STAGES)[keyof typeof STAGES];

const LEGACY: Readonly<Record<string, StageId>> = {
  rtk_rewrite: STAGES.rewriteTerminalCommand,
  temporal_delta: STAGES.deltaRepeatedOutput,
  compress_tool_result: STAGES.compressToolResult,
};

/** Today's id for a stage id read from storage (older rows may use the legacy snake_case ids). */
export function stageId(stored: string): string {
  return LEGACY[stored] ?? stored;
}
