/**
 * The storage ports: small contracts split by concern, each implemented once over kysely and
 * run on either dialect (SQLite file or PostgreSQL database). Operators and the runtime depend on
 * the ports they use only; `Vault` is the composite a runtime holds, so call sites stay simple.
 *
 * Scope: every method that reads or writes evidence takes an optional trailing {@link StoreScope}.
 * Today it is accepted and ignored (the whole store is one tenant); tenant/session scoping of
 * reads and searches (issue 14) fills it in without changing a signature.
 */
import type {
  ArtifactFind,
  ArtifactPage,
  ArtifactPeek,
  ArtifactSummary,
  MetricsSummary,
  PutInput,
  PutResult,
  RequestMetric,
  RequestMetricRow,
  TerminalBaseline,
  VaultUsage,
} from './types.js';

/** Whose evidence a call touches: the tenant (profile / API-key digest) and the session. */
export interface StoreScope {
  readonly tenant?: string;
  readonly sessionId?: string;
}

/** Exact, content-addressed evidence: write once (verified), read by id, search. */
export interface ArtifactStore {
  /** Store content (deduplicated by SHA-256); resolves only after the row is read back and verified. */
  put(input: PutInput, scope?: StoreScope): Promise<PutResult>;
  /** True when the artifact exists and its content hashes to its id. */
  verify(artifactId: string, scope?: StoreScope): Promise<boolean>;
  summary(artifactId: string, scope?: StoreScope): Promise<ArtifactSummary | undefined>;
  /** Exact page; throws ArtifactNotFoundError for an unknown id. Limit is clamped to the page ceiling. */
  page(artifactId: string, offset?: number, limit?: number, scope?: StoreScope): Promise<ArtifactPage>;
  peek(artifactId: string, limit?: number, scope?: StoreScope): Promise<ArtifactPeek>;
  find(artifactId: string, query: string, limit?: number, scope?: StoreScope): Promise<ArtifactFind>;
  /** Substring search over content and tool names, Unicode case-insensitive; the query is plain text. */
  search(query: string, limit?: number, scope?: StoreScope): Promise<readonly ArtifactSummary[]>;
  /** Counters and capacity (O(1)). */
  usage(): Promise<VaultUsage>;
}

/** What a session was shown: inline leases per request, and the pins retention must honour. */
export interface LeaseStore {
  /** Lease preflight (read only). */
  exposureAvailable(sessionId: string, artifactId: string, requestId: string, limit: number): Promise<boolean>;
  /** Authoritative, transactional claim: at most `limit` distinct request ids per (session, artifact) inline, across every process and host. */
  claimExposure(sessionId: string, artifactId: string, requestId: string, limit: number): Promise<boolean>;
  /** Record what was actually delivered (inline becomes max(old, new)). */
  recordExposure(sessionId: string, artifactId: string, requestId: string, inline: boolean): Promise<void>;
  /** Mark artifacts as named by a delivered receipt: retention never deletes them. */
  pin(artifactIds: readonly string[], scope?: StoreScope): Promise<void>;
}

/** The working-state graph behind `working_state_apply` / `working_state_get` (facts §2.10). */
export interface WorkingStateStore {
  /**
   * Validate and persist a batch atomically; the session id is the host's, recorded on the events.
   * Returns the result object (`{accepted, event_ids, counts}`); throws a TokenTerminatorError for a bad batch.
   */
  apply(sessionId: string, operations: readonly Readonly<Record<string, unknown>>[]): Promise<Readonly<Record<string, unknown>>>;
  /** Current state of the session (`{nodes: {id: node}, edges: {id: edge}}`), at most `limit` nodes. */
  get(sessionId: string, options: { readonly includeRetired: boolean; readonly limit: number }): Promise<Readonly<Record<string, unknown>>>;
}

/** State that lets any process continue a session: terminal baselines, sticky renderings, working state. */
export interface SessionStore {
  getBaseline(stateKey: string): Promise<TerminalBaseline | undefined>;
  setBaseline(stateKey: string, artifactId: string): Promise<void>;
  /** Sticky per-session renderings for prompt-cache stability (key → rendered value). */
  getRendering(sessionId: string, key: string): Promise<string | undefined>;
  setRendering(sessionId: string, key: string, value: string): Promise<void>;
  readonly workingState: WorkingStateStore;
}

/** Content-free request metrics. */
export interface MetricsStore {
  /** One row per (session, request), upserted. */
  recordRequestMetric(metric: RequestMetric): Promise<void>;
  /** Many rows in one transaction (a batch of answered requests); a (session, request) given twice keeps the later row. */
  recordRequestMetrics(metrics: readonly RequestMetric[]): Promise<void>;
  /** Sums over every row (the `stats` command). */
  metricsSummary(): Promise<MetricsSummary>;
  /**
   * The newest `limit` rows (default 10,000), oldest first, in the order they were first written
   * (ties broken by session and request id): the series a live report draws.
   */
  requestMetricRows(limit?: number): Promise<readonly RequestMetricRow[]>;
}

/** Which engine a store runs on. Only status, docs and tests look at it; no port behaves differently. */
export type StoreEngine = 'sqlite' | 'postgres';

/** The composite a runtime holds: every port plus its lifetime. */
export interface Vault extends ArtifactStore, LeaseStore, SessionStore, MetricsStore, AsyncDisposable {
  /** Where it is, for status: the file path, ':memory:', or the database URL without its password. */
  readonly path: string;
  readonly engine: StoreEngine;
  close(): Promise<void>;
}
