/** The six modes of the seed. */
export type Mode = 'balanced' | 'aggressive' | 'native' | 'terminal' | 'suggest' | 'off';

/**
 * One validated, frozen configuration. Field → env variable (default):
 * every `TOKEN_TERMINATOR_*` and `INCONTEXT_*` variable of the seeds, camel-cased.
 */
export interface Config {
  readonly enabled: boolean; // TOKEN_TERMINATOR_ENABLED (true)
  readonly mode: Mode; // TOKEN_TERMINATOR_MODE (balanced)
  readonly timeoutMs: number; // TOKEN_TERMINATOR_TIMEOUT_MS (500, ≥ 50)
  readonly backends: readonly string[]; // TOKEN_TERMINATOR_BACKENDS (local; 'all')
  readonly rtkPath: string; // TOKEN_TERMINATOR_RTK_PATH ('')
  readonly cacheTtlSeconds: number; // TOKEN_TERMINATOR_CACHE_TTL (600)
  readonly cacheSize: number; // TOKEN_TERMINATOR_CACHE_SIZE (512)
  readonly temporalDelta: boolean; // TOKEN_TERMINATOR_TEMPORAL_DELTA (true)
  readonly temporalMinChars: number; // TOKEN_TERMINATOR_TEMPORAL_MIN_CHARS (2000)
  readonly temporalScope: 'session' | 'workspace'; // TOKEN_TERMINATOR_TEMPORAL_SCOPE (session)
  readonly nativeMinChars: number; // TOKEN_TERMINATOR_NATIVE_MIN_CHARS (12000)
  readonly nativeMaxChars: number; // TOKEN_TERMINATOR_NATIVE_MAX_CHARS (8000)
  /** Where default files live: TOKEN_TERMINATOR_HOME, else $XDG_DATA_HOME/token-terminator, else ~/.local/share/token-terminator. */
  readonly dataDir: string; // TOKEN_TERMINATOR_HOME (see above)
  readonly dbPath: string; // TOKEN_TERMINATOR_DB_PATH (<data dir>/artifacts.sqlite3)
  readonly minArtifactChars: number; // TOKEN_TERMINATOR_MIN_ARTIFACT_CHARS (4000; the seed's 8000 measured worse, see README)
  readonly maxArtifactChars: number; // TOKEN_TERMINATOR_MAX_ARTIFACT_CHARS (2,000,000)
  readonly vaultMaxBytes: number; // TOKEN_TERMINATOR_VAULT_MAX_BYTES (536,870,912)
  readonly vaultHighWaterPct: number; // TOKEN_TERMINATOR_VAULT_HIGH_WATER_PCT (90)
  readonly vaultLowWaterPct: number; // TOKEN_TERMINATOR_VAULT_LOW_WATER_PCT (80)
  /** How long a vault write waits for another process's lock before the stage fails open. */
  readonly busyTimeoutMs: number; // TOKEN_TERMINATOR_BUSY_TIMEOUT_MS (10000, 0…60000)
  /** A shared vault (and ledger) in PostgreSQL instead of the SQLite files; wins over dbPath and ledgerPath. */
  readonly dbUrl: string; // TOKEN_TERMINATOR_DB_URL ('' = SQLite; postgres://…)
  readonly dbPoolSize: number; // TOKEN_TERMINATOR_DB_POOL_SIZE (10, 1…1000; PostgreSQL connections per process)
  readonly dbStatementTimeoutMs: number; // TOKEN_TERMINATOR_DB_STATEMENT_TIMEOUT_MS (30000, 0 = none; PostgreSQL)
  readonly inlineLeases: number; // TOKEN_TERMINATOR_INLINE_LEASES (1)
  readonly maxPageChars: number; // TOKEN_TERMINATOR_MAX_PAGE_CHARS (20000)
  readonly maxSearchResults: number; // TOKEN_TERMINATOR_MAX_SEARCH_RESULTS (50)
  readonly workingGraphChars: number; // TOKEN_TERMINATOR_WORKING_GRAPH_CHARS (0)
  /** Exact-token half of the acceptance gate (chars only when false; the output cap is OUTPUT_CAP). */
  readonly tokenBudget: boolean; // TOKEN_TERMINATOR_TOKEN_BUDGET (true)
  /** The output-cap stage (incontext's arithmetic) on compiled requests. */
  readonly outputCap: boolean; // TOKEN_TERMINATOR_OUTPUT_CAP (true)
  /** Model id → { contextWindow?, maxOutputTokens? } over the built-in model table. */
  readonly modelLimits: Readonly<Record<string, { readonly contextWindow?: number; readonly maxOutputTokens?: number }>>; // TOKEN_TERMINATOR_MODEL_LIMITS (JSON object)
  readonly tokenizerJson: string; // TOKEN_TERMINATOR_TOKENIZER_JSON ('')
  readonly tiktokenEncoding: string; // TOKEN_TERMINATOR_TIKTOKEN_ENCODING ('')
  readonly contextCompaction: boolean; // TOKEN_TERMINATOR_CONTEXT_COMPACTION (true)
  readonly contextMinVaultChars: number; // TOKEN_TERMINATOR_CONTEXT_MIN_VAULT_CHARS (4000)
  readonly contextCollapseAfterTurns: number; // TOKEN_TERMINATOR_CONTEXT_COLLAPSE_AFTER_TURNS (6)
  readonly contextInlineRecentTurns: number; // TOKEN_TERMINATOR_CONTEXT_INLINE_RECENT_TURNS (5)
  /** Compaction boundaries advance in blocks of this many turns; 0 = automatic, min(8, collapse window). */
  readonly contextBlockTurns: number; // TOKEN_TERMINATOR_CONTEXT_BLOCK_TURNS (12)
  /** What one lease exposure is: 0 = one request id; n = a block of n turns. */
  readonly leaseBlockTurns: number; // TOKEN_TERMINATOR_LEASE_BLOCK_TURNS (0)
  /** A first exposure longer than this shows a bounded view plus its receipt; 0 = never. */
  readonly maxInlineChars: number; // TOKEN_TERMINATOR_MAX_INLINE_CHARS (32000)
  readonly previewMarker: boolean; // TOKEN_TERMINATOR_PREVIEW_MARKER (false)
  readonly contextLimitTokens: number; // TOKEN_TERMINATOR_CONTEXT_LIMIT_TOKENS (0)
  readonly outputReserveTokens: number; // TOKEN_TERMINATOR_OUTPUT_RESERVE_TOKENS (4096)
  readonly tokenSafetyMargin: number; // TOKEN_TERMINATOR_TOKEN_SAFETY_MARGIN (512)
  readonly ledger: boolean; // TOKEN_TERMINATOR_LEDGER (true)
  readonly ledgerPath: string; // TOKEN_TERMINATOR_LEDGER_PATH (<data dir>/experiments.sqlite3)
  readonly stateDb: string; // TOKEN_TERMINATOR_STATE_DB ('')
  readonly experiment: string; // TOKEN_TERMINATOR_EXPERIMENT (default)
  readonly exclude: readonly string[]; // TOKEN_TERMINATOR_EXCLUDE ('')
  readonly pytestGuard: boolean; // TOKEN_TERMINATOR_PYTEST_GUARD (true)
  readonly eqInputUsdPerM: number; // TOKEN_TERMINATOR_EQ_INPUT_USD_PER_M (0)
  readonly eqOutputUsdPerM: number; // TOKEN_TERMINATOR_EQ_OUTPUT_USD_PER_M (0)
  readonly eqCacheReadUsdPerM: number; // TOKEN_TERMINATOR_EQ_CACHE_READ_USD_PER_M (0)
  readonly eqCacheWriteUsdPerM: number; // TOKEN_TERMINATOR_EQ_CACHE_WRITE_USD_PER_M (0)
  readonly eqRateCard: string; // TOKEN_TERMINATOR_EQ_RATE_CARD ('')
  /** Host tool name → canonical name (search_files, process, read_file, terminal). */
  readonly toolNames: Readonly<Record<string, string>>; // TOKEN_TERMINATOR_TOOL_NAMES (JSON object)

  readonly incontext: {
    readonly backend: string; // INCONTEXT_BACKEND (vllm when a URL is set, else tiktoken)
    readonly tokenizerUrl: string; // INCONTEXT_TOKENIZER_URL ('')
    readonly tokenizerTimeoutSeconds: number; // INCONTEXT_TOKENIZER_TIMEOUT_SECONDS (30)
    readonly tokenizerUserAgent: string; // INCONTEXT_TOKENIZER_USER_AGENT (automatic)
    readonly fallbackMarginTokens: number; // INCONTEXT_FALLBACK_MARGIN_TOKENS (1024)
    readonly minOutputTokens: number; // INCONTEXT_MIN_OUTPUT_TOKENS (4096)
    readonly compressionWindowTokens: number | undefined; // INCONTEXT_COMPRESSION_WINDOW_TOKENS (unset)
  };
}
