/** When old outputs may become digests (docs/cache-policy.md). */
export const HISTORY_POLICIES = ['working-set', 'lazy'] as const;
/** One of {@link HISTORY_POLICIES}. */
export type HistoryPolicy = (typeof HISTORY_POLICIES)[number];

/** The six reduction modes (see {@link MODES} for what each one reduces). */
export type Mode = 'balanced' | 'aggressive' | 'native' | 'terminal' | 'suggest' | 'off';

/** One validated, frozen configuration: each field's env variable and default beside it. */
export interface Config {
  /** Master switch: false passes everything through (TOKEN_TERMINATOR_ENABLED). @defaultValue `true` */
  readonly enabled: boolean; // TOKEN_TERMINATOR_ENABLED (true)
  /** Reduction mode (TOKEN_TERMINATOR_MODE). @defaultValue `'balanced'` */
  readonly mode: Mode; // TOKEN_TERMINATOR_MODE (balanced)
  /** Deadline of one `rtk rewrite` call, ms (TOKEN_TERMINATOR_TIMEOUT_MS). @defaultValue `500` */
  readonly timeoutMs: number; // TOKEN_TERMINATOR_TIMEOUT_MS (500, ≥ 50)
  /** Terminal backends whose commands may be rewritten or compacted. @defaultValue `['local']` */
  readonly backends: readonly string[]; // TOKEN_TERMINATOR_BACKENDS (local; 'all')
  /** Pinned rtk binary; empty means `rtk` on PATH (TOKEN_TERMINATOR_RTK_PATH). @defaultValue `''` */
  readonly rtkPath: string; // TOKEN_TERMINATOR_RTK_PATH ('')
  /** Time-to-live of the command-rewrite cache, seconds (TOKEN_TERMINATOR_CACHE_TTL). @defaultValue `600` */
  readonly cacheTtlSeconds: number; // TOKEN_TERMINATOR_CACHE_TTL (600)
  /** Entries of the command-rewrite cache (TOKEN_TERMINATOR_CACHE_SIZE). @defaultValue `512` */
  readonly cacheSize: number; // TOKEN_TERMINATOR_CACHE_SIZE (512)
  /** Turn repeated terminal outputs into diffs (TOKEN_TERMINATOR_TEMPORAL_DELTA). @defaultValue `true` */
  readonly temporalDelta: boolean; // TOKEN_TERMINATOR_TEMPORAL_DELTA (true)
  /** Shortest output a temporal delta is tried on (TOKEN_TERMINATOR_TEMPORAL_MIN_CHARS). @defaultValue `2000` */
  readonly temporalMinChars: number; // TOKEN_TERMINATOR_TEMPORAL_MIN_CHARS (2000)
  /** Whether delta baselines are per session or shared by the workspace. @defaultValue `'session'` */
  readonly temporalScope: 'session' | 'workspace'; // TOKEN_TERMINATOR_TEMPORAL_SCOPE (session)
  /** Shortest search/process/read result compacted natively. @defaultValue `12000` */
  readonly nativeMinChars: number; // TOKEN_TERMINATOR_NATIVE_MIN_CHARS (12000)
  /** Target size of native compact text (TOKEN_TERMINATOR_NATIVE_MAX_CHARS). @defaultValue `8000` */
  readonly nativeMaxChars: number; // TOKEN_TERMINATOR_NATIVE_MAX_CHARS (8000)
  /**
   * Where default files live: TOKEN_TERMINATOR_HOME, else $XDG_DATA_HOME/token-terminator, else ~/.local/share/token-terminator.
   *
   * @defaultValue `$XDG_DATA_HOME/token-terminator` when XDG_DATA_HOME is absolute, else `%LOCALAPPDATA%\token-terminator` on Windows, else `~/.local/share/token-terminator`
   */
  readonly dataDir: string; // TOKEN_TERMINATOR_HOME (see above)
  /** Vault file or PostgreSQL URL (TOKEN_TERMINATOR_DB_PATH). @defaultValue unset */
  readonly dbPath: string; // TOKEN_TERMINATOR_DB_PATH (<data dir>/artifacts.sqlite3)
  /** Shortest tool output the request stages manage (TOKEN_TERMINATOR_MIN_ARTIFACT_CHARS). @defaultValue `4000` */
  readonly minArtifactChars: number; // TOKEN_TERMINATOR_MIN_ARTIFACT_CHARS (4000; 8000 measured worse, see README)
  /** Longest artifact the vault accepts, code points. @defaultValue `2_000_000` */
  readonly maxArtifactChars: number; // TOKEN_TERMINATOR_MAX_ARTIFACT_CHARS (2,000,000)
  /** Vault capacity in UTF-8 bytes of artifact content. @defaultValue `536_870_912` (512 MiB) */
  readonly vaultMaxBytes: number; // TOKEN_TERMINATOR_VAULT_MAX_BYTES (536,870,912)
  /** Fill level, % of capacity, past which unprotected artifacts are pruned. @defaultValue `90` */
  readonly vaultHighWaterPct: number; // TOKEN_TERMINATOR_VAULT_HIGH_WATER_PCT (90)
  /** Fill level, % of capacity, pruning stops at (TOKEN_TERMINATOR_VAULT_LOW_WATER_PCT). @defaultValue `80` */
  readonly vaultLowWaterPct: number; // TOKEN_TERMINATOR_VAULT_LOW_WATER_PCT (80)
  /** How long a vault write waits for another process's lock before the stage fails open. @defaultValue `10000` */
  readonly busyTimeoutMs: number; // TOKEN_TERMINATOR_BUSY_TIMEOUT_MS (10000, 0…60000)
  /**
   * A session idle this long (no delivery, lease or rendering) has its pins released when retention needs room.
   *
   * @defaultValue `21600` (6 hours)
   */
  readonly sessionTtlSeconds: number; // TOKEN_TERMINATOR_SESSION_TTL_SECONDS (21600, 60…31,536,000)
  /** A recovery search returns what it found after this long, flagged partial. @defaultValue `2000` */
  readonly searchDeadlineMs: number; // TOKEN_TERMINATOR_SEARCH_DEADLINE_MS (2000, 10…60000)
  /**
   * A shared vault (and ledger) in PostgreSQL instead of the SQLite files; wins over dbPath and ledgerPath.
   *
   * @defaultValue `''` (the SQLite files)
   */
  readonly dbUrl: string; // TOKEN_TERMINATOR_DB_URL ('' = SQLite; postgres://…)
  /** PostgreSQL connections in this process's pool (TOKEN_TERMINATOR_DB_POOL_SIZE). @defaultValue `10` */
  readonly dbPoolSize: number; // TOKEN_TERMINATOR_DB_POOL_SIZE (10, 1…1000; PostgreSQL connections per process)
  /** PostgreSQL statement timeout, ms (TOKEN_TERMINATOR_DB_STATEMENT_TIMEOUT_MS). @defaultValue `30_000` */
  readonly dbStatementTimeoutMs: number; // TOKEN_TERMINATOR_DB_STATEMENT_TIMEOUT_MS (30000, 0 = none; PostgreSQL)
  /** Requests that must have shown an output inline before a rewrite may replace it. @defaultValue `1` */
  readonly inlineLeases: number; // TOKEN_TERMINATOR_INLINE_LEASES (1)
  /** Page ceiling of the recovery tool, code points (TOKEN_TERMINATOR_MAX_PAGE_CHARS). @defaultValue `20000` */
  readonly maxPageChars: number; // TOKEN_TERMINATOR_MAX_PAGE_CHARS (20000)
  /** Most results a recovery search returns (TOKEN_TERMINATOR_MAX_SEARCH_RESULTS). @defaultValue `50` */
  readonly maxSearchResults: number; // TOKEN_TERMINATOR_MAX_SEARCH_RESULTS (50)
  /** Budget of the working-state block; 0 = off (TOKEN_TERMINATOR_WORKING_GRAPH_CHARS). @defaultValue `0` */
  readonly workingGraphChars: number; // TOKEN_TERMINATOR_WORKING_GRAPH_CHARS (0)
  /** Exact-token half of the acceptance gate (false: chars only; the output cap is OUTPUT_CAP). @defaultValue `true` */
  readonly tokenBudget: boolean; // TOKEN_TERMINATOR_TOKEN_BUDGET (true)
  /** The output-cap stage (incontext's arithmetic) on compiled requests. @defaultValue `true` */
  readonly outputCap: boolean; // TOKEN_TERMINATOR_OUTPUT_CAP (true)
  /** Window fit (docs/window.md): a request over W − R is reduced losslessly until it fits. @defaultValue `true` */
  readonly windowFit: boolean; // TOKEN_TERMINATOR_WINDOW_FIT (true)
  /** Low-water mark of a window fit, in percent of W − R. @defaultValue `70` */
  readonly windowLowWaterPct: number; // TOKEN_TERMINATOR_WINDOW_LOW_WATER_PCT (70)
  /**
   * The window fit's reductions in order (reasoning, view, digest-idle, digest, receipt).
   *
   * @defaultValue `['reasoning', 'digest-idle', 'view', 'receipt']`
   */
  readonly windowFitOrder: readonly string[]; // TOKEN_TERMINATOR_WINDOW_FIT_ORDER (reasoning,digest-idle,view,receipt)
  /**
   * Model id → { contextWindow?, maxOutputTokens? } over the built-in model table.
   *
   * @defaultValue `{}` (the built-in table only)
   */
  readonly modelLimits: Readonly<
    Record<string, { readonly contextWindow?: number; readonly maxOutputTokens?: number }>
  >; // TOKEN_TERMINATOR_MODEL_LIMITS (JSON object)
  /** tokenizer.json used for exact counts; empty = none (TOKEN_TERMINATOR_TOKENIZER_JSON). @defaultValue `''` */
  readonly tokenizerJson: string; // TOKEN_TERMINATOR_TOKENIZER_JSON ('')
  /** Explicit tiktoken encoding; empty = chosen by model (TOKEN_TERMINATOR_TIKTOKEN_ENCODING). @defaultValue `''` */
  readonly tiktokenEncoding: string; // TOKEN_TERMINATOR_TIKTOKEN_ENCODING ('')
  /** Run the history-compiling request stage (TOKEN_TERMINATOR_CONTEXT_COMPACTION). @defaultValue `true` */
  readonly contextCompaction: boolean; // TOKEN_TERMINATOR_CONTEXT_COMPACTION (true)
  /** Old tool outputs at least this long become a digest plus a receipt in history rewrites. @defaultValue `600` */
  readonly contextMinVaultChars: number; // TOKEN_TERMINATOR_CONTEXT_MIN_VAULT_CHARS (600)
  /**
   * Opt-in turn collapse: turns older than this lose their outputs' digests and their reasoning (0 = off).
   *
   * @defaultValue `0` (off)
   */
  readonly contextCollapseAfterTurns: number; // TOKEN_TERMINATOR_CONTEXT_COLLAPSE_AFTER_TURNS (0)
  /** Tool outputs of the newest turns are never digested. @defaultValue `1` */
  readonly contextInlineRecentTurns: number; // TOKEN_TERMINATOR_CONTEXT_INLINE_RECENT_TURNS (1)
  /**
   * 0 = history rewrites follow the cache-economic rule; n = rewrite only when the turn count crosses a multiple of n.
   *
   * @defaultValue `0`
   */
  readonly contextBlockTurns: number; // TOKEN_TERMINATOR_CONTEXT_BLOCK_TURNS (0)
  /**
   * Requests the cache-economic rule expects after this one; 0 = as many as the conversation has had so far.
   *
   * @defaultValue `0`
   */
  readonly rewriteHorizonRequests: number; // TOKEN_TERMINATOR_REWRITE_HORIZON_REQUESTS (0)
  /**
   * When an old output may become a digest (docs/cache-policy.md): `working-set` once the agent is
   * done with it (not referred to for `workingSetIdleTurns` turns), `lazy` one turn after it was shown.
   *
   * @defaultValue `'working-set'`
   */
  readonly historyPolicy: HistoryPolicy; // TOKEN_TERMINATOR_HISTORY_POLICY (working-set | lazy)
  /** Working-set policy: turns an output must go unreferenced before it may become a digest. @defaultValue `1` */
  readonly workingSetIdleTurns: number; // TOKEN_TERMINATOR_WORKING_SET_IDLE_TURNS (1)
  /** Budget of the diagnostic lines an old output's digest keeps (code points). @defaultValue `400` */
  readonly digestDiagnosticChars: number; // TOKEN_TERMINATOR_DIGEST_DIAGNOSTIC_CHARS (400)
  /** Old assistant reasoning (outside action blocks) becomes a receipt in history rewrites. @defaultValue `false` */
  readonly reasoningReduction: boolean; // TOKEN_TERMINATOR_REASONING_REDUCTION (false)
  /**
   * Which user-role messages are a text-protocol agent's command output (a JavaScript regex; `none` = never).
   *
   * @defaultValue a pattern matching `<returncode>…</returncode>` or `OBSERVATION:` at the start, or a `(Current directory: …)` line followed by a `bash-$` prompt at the end
   */
  readonly observationPattern: string; // TOKEN_TERMINATOR_OBSERVATION_PATTERN (see src/compile/observations.ts)
  /**
   * Opt-in: large skill catalogs in the instructions are routed to the current turn (rewrites the instruction prefix).
   *
   * @defaultValue `false`
   */
  readonly skillRouting: boolean; // TOKEN_TERMINATOR_SKILL_ROUTING (false)
  /** Prompt-cache pricing profile: `auto` (by route), `openai` or `anthropic`. @defaultValue `'auto'` */
  readonly pricingProfile: 'auto' | 'openai' | 'anthropic'; // TOKEN_TERMINATOR_PRICING_PROFILE (auto)
  /** Overrides the profile's cache-read multiplier (0…1). @defaultValue `undefined` (the profile's) */
  readonly cacheReadMultiplier: number | undefined; // TOKEN_TERMINATOR_CACHE_READ_MULTIPLIER (unset)
  /** Overrides the profile's cache-write multiplier (≥ 1). @defaultValue `undefined` (the profile's) */
  readonly cacheWriteMultiplier: number | undefined; // TOKEN_TERMINATOR_CACHE_WRITE_MULTIPLIER (unset)
  /** Overrides the profile's minimum cacheable prefix in tokens. @defaultValue `undefined` (the profile's) */
  readonly minCachePrefixTokens: number | undefined; // TOKEN_TERMINATOR_MIN_CACHE_PREFIX_TOKENS (unset)
  /** A first exposure longer than this shows a bounded view plus its receipt; 0 = never. @defaultValue `32000` */
  readonly maxInlineChars: number; // TOKEN_TERMINATOR_MAX_INLINE_CHARS (32000)
  /** Prefix rewritten commands with `: RTK && ` (TOKEN_TERMINATOR_PREVIEW_MARKER). @defaultValue `false` */
  readonly previewMarker: boolean; // TOKEN_TERMINATOR_PREVIEW_MARKER (false)
  /**
   * The model's context limit for budget reporting: the output-cap stage notes the usable budget (this
   * limit less the reserve and margin below) and what the prompt leaves of it; never truncates. 0 = off.
   *
   * @defaultValue `0`
   */
  readonly contextLimitTokens: number; // TOKEN_TERMINATOR_CONTEXT_LIMIT_TOKENS (0)
  /**
   * Tokens the budget report reserves for output (the cap's own reserve R is INCONTEXT_MIN_OUTPUT_TOKENS).
   *
   * @defaultValue `4096`
   */
  readonly outputReserveTokens: number; // TOKEN_TERMINATOR_OUTPUT_RESERVE_TOKENS (4096)
  /** Headroom the budget report keeps below the context limit (reserve + margin < limit). @defaultValue `512` */
  readonly tokenSafetyMargin: number; // TOKEN_TERMINATOR_TOKEN_SAFETY_MARGIN (512)
  /** Record the A/B experiment ledger (TOKEN_TERMINATOR_LEDGER). @defaultValue `true` */
  readonly ledger: boolean; // TOKEN_TERMINATOR_LEDGER (true)
  /** Experiment ledger file (TOKEN_TERMINATOR_LEDGER_PATH). @defaultValue `experiments.sqlite3` beside the vault */
  readonly ledgerPath: string; // TOKEN_TERMINATOR_LEDGER_PATH (<data dir>/experiments.sqlite3)
  /** Experiment name the ledger tags sessions with (TOKEN_TERMINATOR_EXPERIMENT). @defaultValue `'default'` */
  readonly experiment: string; // TOKEN_TERMINATOR_EXPERIMENT (default)
  /** Command prefixes never rewritten (TOKEN_TERMINATOR_EXCLUDE). @defaultValue `[]` */
  readonly exclude: readonly string[]; // TOKEN_TERMINATOR_EXCLUDE ('')
  /** Skip pytest commands whose project config is already quiet. @defaultValue `true` */
  readonly pytestGuard: boolean; // TOKEN_TERMINATOR_PYTEST_GUARD (true)
  /**
   * API-equivalent USD per million uncached input tokens: `report` and `/dashboard` price raw and sent
   * request tokens at it. All four prices 0 = no rate card.
   *
   * @defaultValue `0`
   */
  readonly eqInputUsdPerM: number; // TOKEN_TERMINATOR_EQ_INPUT_USD_PER_M (0)
  /** API-equivalent USD per million output tokens (the figures' `output_tokens`). @defaultValue `0` */
  readonly eqOutputUsdPerM: number; // TOKEN_TERMINATOR_EQ_OUTPUT_USD_PER_M (0)
  /** API-equivalent USD per million prompt-cache reads (the figures' `cache_read_tokens`). @defaultValue `0` */
  readonly eqCacheReadUsdPerM: number; // TOKEN_TERMINATOR_EQ_CACHE_READ_USD_PER_M (0)
  /** API-equivalent USD per million prompt-cache writes (the figures' `cache_write_tokens`). @defaultValue `0` */
  readonly eqCacheWriteUsdPerM: number; // TOKEN_TERMINATOR_EQ_CACHE_WRITE_USD_PER_M (0)
  /**
   * Label shown beside every USD figure priced with the EQ_* prices (empty = "API-equivalent"): an
   * equivalent, never the marginal cost of a subscription.
   *
   * @defaultValue `''`
   */
  readonly eqRateCard: string; // TOKEN_TERMINATOR_EQ_RATE_CARD ('')
  /** Host tool name → canonical name (search_files, process, read_file, terminal). @defaultValue `{}` */
  readonly toolNames: Readonly<Record<string, string>>; // TOKEN_TERMINATOR_TOOL_NAMES (JSON object)

  readonly incontext: {
    /**
     * Token-counting backend of the output cap (INCONTEXT_BACKEND).
     *
     * @defaultValue `'vllm'` when `tokenizerUrl` is set, else `'tiktoken'`
     */
    readonly backend: string; // INCONTEXT_BACKEND (vllm when a URL is set, else tiktoken)
    /** Base URL of a vLLM server whose `/tokenize` counts the prompt. @defaultValue `''` (none) */
    readonly tokenizerUrl: string; // INCONTEXT_TOKENIZER_URL ('')
    /** How long a `/tokenize` call may take (INCONTEXT_TOKENIZER_TIMEOUT_SECONDS). @defaultValue `30` */
    readonly tokenizerTimeoutSeconds: number; // INCONTEXT_TOKENIZER_TIMEOUT_SECONDS (30)
    /** User-Agent of `/tokenize` calls. @defaultValue `token-terminator/<package version>` */
    readonly tokenizerUserAgent: string; // INCONTEXT_TOKENIZER_USER_AGENT (automatic)
    /** Tokens added to an estimated prompt size when no exact count is available. @defaultValue `1024` */
    readonly fallbackMarginTokens: number; // INCONTEXT_FALLBACK_MARGIN_TOKENS (1024)
    /** Output tokens reserved for the reply (INCONTEXT_MIN_OUTPUT_TOKENS). @defaultValue `4096` */
    readonly minOutputTokens: number; // INCONTEXT_MIN_OUTPUT_TOKENS (4096)
    /** An override of the budgeting window W. @defaultValue `undefined` (no override) */
    readonly compressionWindowTokens: number | undefined; // INCONTEXT_COMPRESSION_WINDOW_TOKENS (unset)
  };
}
