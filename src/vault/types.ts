/**
 * The data the storage ports exchange (ports.ts has the contracts). Offsets and lengths are in
 * Unicode code points, never UTF-16 units.
 */
import type { LineMatches, Synopsis } from './synopsis.js';

export interface PutInput {
  readonly content: string;
  readonly toolName?: string;
  /** Tool arguments: stored privately as provenance, never shown in receipts. */
  readonly args?: unknown;
  readonly sessionId?: string;
  readonly callId?: string;
  /**
   * The hex SHA-256 of `content`'s UTF-8 bytes when the caller has it (src/ledger/digests.ts), so put
   * does not hash again. Trusted: a wrong one stores the content under an id every read refuses.
   *
   * @defaultValue computed by put
   */
  readonly digest?: string;
}

/** The result of storing an artifact: its id and digest, and whether it was new. */
export interface PutResult extends Pick<ArtifactSummary, 'sha256' | 'chars' | 'bytes'> {
  /** `a_` + first 32 hex chars of SHA-256 (full 64 on a prefix collision). */
  readonly artifactId: string;
  /** False when the same content was already stored. */
  readonly created: boolean;
}

/** Metadata of a stored artifact (no content). */
export interface ArtifactSummary {
  readonly artifactId: string;
  readonly sha256: string;
  readonly chars: number;
  readonly bytes: number;
  readonly toolName: string;
  readonly createdAt: string;
  readonly observationCount: number;
}

/** One page of an artifact's exact content, by code-point offset. */
export interface ArtifactPage extends Pick<ArtifactSummary, 'artifactId' | 'sha256' | 'toolName'> {
  readonly content: string;
  readonly offset: number;
  /** null when this page reaches the end. */
  readonly nextOffset: number | null;
  readonly totalChars: number;
}

/** A lossy synopsis of an artifact: size, head and tail, error lines and structure. */
export interface ArtifactPeek extends Pick<
  ArtifactSummary,
  'artifactId' | 'sha256' | 'toolName' | 'observationCount' | 'createdAt'
> {
  readonly totalChars: number;
  readonly totalBytes: number;
  readonly lineCount: number;
  readonly structure: unknown;
  readonly synopsis: Synopsis;
  readonly lossy: true;
  readonly exactRecovery: string;
}

/** The lines of one artifact that match a query. */
export interface ArtifactFind extends LineMatches {
  readonly artifactId: string;
  readonly query: string;
  readonly truncated: boolean;
  readonly lossy: true;
}

/** How full the vault is: artifacts and bytes stored against the capacity and its retention watermarks. */
export interface VaultUsage {
  readonly artifacts: number;
  readonly bytes: number;
  readonly capacityBytes: number;
  readonly highWaterBytes: number;
  readonly lowWaterBytes: number;
  readonly prunedArtifacts: number;
  readonly prunedBytes: number;
}

/** The last output of a repeated terminal command, the base the next temporal delta is taken against. */
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

/** One stored metric row as read back (`requestMetricRows`): numbers, labels and ids only; no token counts when the writer had no counter. */
export type RequestMetricRow = Omit<RequestMetric, 'model' | 'tokenizer' | 'components' | 'savedByStage'> & {
  readonly savedByStage: Readonly<Record<string, number>>;
};

/** Sums of the content-free request metrics (the `stats` command). */
export interface MetricsSummary {
  readonly requests: number;
  readonly sessions: number;
  readonly raw_chars: number;
  readonly final_chars: number;
  readonly raw_tokens: number;
  readonly final_tokens: number;
  readonly reduction_pct: number;
  readonly receipts: number;
  readonly failed_open_requests: number;
  /** Saved chars per mechanism (stage name → chars). */
  readonly saved_by_stage: Readonly<Record<string, number>>;
  /** Raw/final tokens per component with each one's share of the raw total (percent). */
  readonly components: Readonly<
    Record<string, { readonly raw_tokens: number; readonly final_tokens: number; readonly raw_pct: number }>
  >;
  readonly by_mode: Readonly<
    Record<string, { readonly requests: number; readonly raw_tokens: number; readonly final_tokens: number }>
  >;
}

export type {
  ArtifactStore,
  Delivery,
  LeaseStore,
  LockBudget,
  SearchResults,
  SessionPins,
  VaultHealth,
  MetricsStore,
  SessionStore,
  StoreEngine,
  StoreScope,
  Vault,
  WorkingStateStore,
} from './ports.js';
