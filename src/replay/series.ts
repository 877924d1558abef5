/**
 * The per-request series `replay --series` adds to each session (opt-in, so the default JSON keeps
 * exactly its keys): what one request weighed raw and as sent, and the chars each mechanism saved
 * in it. Numbers and stage names only, like the vault's metrics rows.
 */
export interface RequestPoint {
  readonly raw_tokens: number;
  readonly final_tokens: number;
  readonly raw_chars: number;
  readonly final_chars: number;
  readonly receipts: number;
  /** Chars saved in this request per stage (tool-stream savings count in every request that carries them). */
  readonly saved_by_stage: Readonly<Record<string, number>>;
}
