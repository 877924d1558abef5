/**
 * The Vault contract: a private, content-addressed store of exact tool evidence.
 *
 * Everything above the vault depends on this interface only; `createVault` (sqlite.ts) is the one
 * concrete implementation. Offsets and lengths are in Unicode code points, never UTF-16 units.
 */

export interface PutInput {
  readonly content: string;
  readonly toolName?: string;
  /** Tool arguments: stored privately as provenance, never shown in receipts. */
  readonly args?: unknown;
  readonly sessionId?: string;
  readonly callId?: string;
}

export interface PutResult {
  /** `a_` + first 32 hex chars of SHA-256 (full 64 on a prefix collision). */
  readonly artifactId: string;
  readonly sha256: string;
  /** False when the same content was already stored. */
  readonly created: boolean;
  /** Length in code points. */
  readonly chars: number;
  readonly bytes: number;
}

export interface ArtifactSummary {
  readonly artifactId: string;
  readonly sha256: string;
  readonly chars: number;
  readonly bytes: number;
  readonly toolName: string;
  readonly createdAt: string;
  readonly observationCount: number;
}

export interface ArtifactPage {
  readonly artifactId: string;
  readonly content: string;
  readonly offset: number;
  /** null when this page reaches the end. */
  readonly nextOffset: number | null;
  readonly totalChars: number;
  readonly sha256: string;
  readonly toolName: string;
}

export interface ArtifactPeek {
  readonly artifactId: string;
  readonly sha256: string;
  readonly toolName: string;
  readonly totalChars: number;
  readonly totalBytes: number;
  readonly lineCount: number;
  readonly observationCount: number;
  readonly createdAt: string;
  readonly structure: unknown;
  readonly synopsis: { readonly head: readonly string[]; readonly tail: readonly string[]; readonly signals: readonly string[] };
  readonly lossy: true;
  readonly exactRecovery: string;
}

export interface ArtifactFind {
  readonly artifactId: string;
  readonly query: string;
  readonly matches: readonly { readonly line: number; readonly text: string }[];
  readonly totalMatches: number;
  readonly truncated: boolean;
  readonly lossy: true;
}

export interface VaultUsage {
  readonly artifacts: number;
  readonly bytes: number;
  readonly capacityBytes: number;
  readonly highWaterBytes: number;
  readonly lowWaterBytes: number;
  readonly prunedArtifacts: number;
  readonly prunedBytes: number;
}

export interface TerminalBaseline {
  readonly stateKey: string;
  readonly artifactId: string;
  readonly updatedAt: string;
}

/** One content-free row per (session, request). */
export interface RequestMetric {
  readonly sessionId: string;
  readonly requestId: string;
  readonly mode: string;
  readonly model?: string;
  readonly rawChars: number;
  readonly finalChars: number;
  readonly rawTokens?: number;
  readonly finalTokens?: number;
  readonly tokenizer?: string;
  readonly receipts: number;
  readonly failedOpen: boolean;
  /** Saved chars per mechanism (stage name → chars). */
  readonly savedByStage?: Readonly<Record<string, number>>;
  /** Raw/final tokens per component (instructions, skill_catalog, tool_schemas, tool_results, ...). */
  readonly components?: Readonly<Record<string, { readonly raw: number; readonly final: number }>>;
}

export interface Vault {
  /** Store content (deduplicated by SHA-256); resolves only after the row is read back and verified. */
  put(input: PutInput): Promise<PutResult>;
  /** True when the artifact exists and its content hashes to its id. */
  verify(artifactId: string): Promise<boolean>;
  summary(artifactId: string): Promise<ArtifactSummary | undefined>;
  /** Exact page; throws ArtifactNotFoundError for an unknown id. Limit is clamped to the page ceiling. */
  page(artifactId: string, offset?: number, limit?: number): Promise<ArtifactPage>;
  peek(artifactId: string, limit?: number): Promise<ArtifactPeek>;
  find(artifactId: string, query: string, limit?: number): Promise<ArtifactFind>;
  /** FTS over content and tool names, Unicode case-insensitive; the query is plain text, never FTS syntax. */
  search(query: string, limit?: number): Promise<readonly ArtifactSummary[]>;

  /** Lease preflight (read only). */
  exposureAvailable(sessionId: string, artifactId: string, requestId: string, limit: number): Promise<boolean>;
  /** Authoritative, transactional claim: at most `limit` distinct request ids per (session, artifact) inline. */
  claimExposure(sessionId: string, artifactId: string, requestId: string, limit: number): Promise<boolean>;
  /** Record what was actually delivered (inline becomes max(old, new)). */
  recordExposure(sessionId: string, artifactId: string, requestId: string, inline: boolean): Promise<void>;
  /** Mark artifacts as named by a delivered receipt: retention never deletes them. */
  pin(artifactIds: readonly string[]): Promise<void>;

  getBaseline(stateKey: string): Promise<TerminalBaseline | undefined>;
  setBaseline(stateKey: string, artifactId: string): Promise<void>;

  /** Sticky per-session renderings for prompt-cache stability (key → rendered value). */
  getRendering(sessionId: string, key: string): Promise<string | undefined>;
  setRendering(sessionId: string, key: string, value: string): Promise<void>;

  recordRequestMetric(metric: RequestMetric): Promise<void>;
  usage(): Promise<VaultUsage>;
  /** Where the file is (for status); ':memory:' for an in-memory database. */
  readonly path: string;
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}
