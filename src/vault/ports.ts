/**
 * The storage ports: small contracts split by concern, each implemented once over kysely on either
 * dialect; `Vault` is the composite a runtime holds.
 *
 * Scope: every method that reads or writes evidence takes an optional trailing {@link StoreScope}.
 * Given one, reads and searches see only the artifacts its tenant and session observed or were
 * delivered; without one, the whole store (trusted callers only: the owner's CLI, migrations,
 * tests; never the request path, which holds a `RequestStore` and `ScopedReads`, see
 * src/vault/scoped-reads.ts). Writes record the scope as provenance and take its lock-wait budget.
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

import type { StoreScope } from '../step.js';
export type { LockBudget, StoreScope } from '../step.js';

/** Results of a search; `partial` is true when its deadline or work limit cut it short (more may match). */
export type SearchResults = readonly ArtifactSummary[] & { readonly partial: boolean };

/** The exact content an artifact id was put with, and its hex SHA-256 (see {@link LeaseStore.deliver}). */
export interface KnownContent {
  readonly content: string;
  readonly sha256: string;
}

/** What {@link LeaseStore.deliver} committed. */
export interface Delivery {
  /** Ids that are gone (or whose content no longer hashes to them): no receipt may name them. */
  readonly missing: readonly string[];
  /** The session's pin epoch after the delivery (see {@link SessionPins}). */
  readonly epoch: string;
}

/** A session's pin record: while `epoch` is unchanged, nothing it pinned was released. */
export interface SessionPins {
  readonly epoch: string;
  /** ms since the epoch (vault clock). */
  readonly lastSeenMs: number;
  readonly closed: boolean;
}

/** The vault's own view of its health (status reports it; a failing state makes writes refuse). */
export interface VaultHealth {
  /**
   * `deleted` / `replaced`: the opened file is no longer the one at its path (writes refuse);
   * `corrupt`: the integrity check failed (intact artifacts are still served, verified by hash);
   * `read_only`: the file could only be opened for reading (recovery is served, nothing is written).
   */
  readonly state: 'ok' | 'deleted' | 'replaced' | 'corrupt' | 'read_only';
  /** Content-free detail: an error code, or the integrity check's first finding. */
  readonly detail?: string;
}

/** Exact, content-addressed evidence: write once (verified), read by id, search. */
export interface ArtifactStore {
  /** Store content (deduplicated by SHA-256); resolves only after the row is read back and verified. */
  put(input: PutInput, scope?: StoreScope): Promise<PutResult>;
  /** {@link put} of each input in ONE write transaction; an input put refuses, or whose read-back fails, is its error (src/vault/artifacts.ts). */
  putMany?(inputs: readonly PutInput[], scope?: StoreScope): Promise<readonly (PutResult | Error)[]>;
  /** True when the artifact exists and its content hashes to its id (compared with `known` instead, when given). */
  verify(artifactId: string, scope?: StoreScope, known?: KnownContent): Promise<boolean>;
  summary(artifactId: string, scope?: StoreScope): Promise<ArtifactSummary | undefined>;
  /** Exact page; throws ArtifactNotFoundError for an unknown id. Limit is clamped to the page ceiling. */
  page(artifactId: string, offset?: number, limit?: number, scope?: StoreScope): Promise<ArtifactPage>;
  /** The whole exact content in one load (each page loads it too); throws ArtifactNotFoundError for an unknown id. */
  read(artifactId: string, scope?: StoreScope): Promise<string>;
  peek(artifactId: string, limit?: number, scope?: StoreScope): Promise<ArtifactPeek>;
  find(artifactId: string, query: string, limit?: number, scope?: StoreScope): Promise<ArtifactFind>;
  /** Plain-text substring search over content and tool names, case-insensitive; `partial` when the deadline hit. */
  search(query: string, limit?: number, scope?: StoreScope): Promise<SearchResults>;
  /** Counters and capacity (O(1)). */
  usage(): Promise<VaultUsage>;
}

/**
 * What a session was shown: inline leases per request, and the pins retention must honour. Pins
 * and leases live as long as their session: once it is closed, or idle beyond the vault's session
 * TTL, retention may release them (oldest first) and then prune what they protected.
 */
export interface LeaseStore {
  /** Lease preflight (read only). */
  exposureAvailable(sessionId: string, artifactId: string, requestId: string, limit: number): Promise<boolean>;
  /** Authoritative, transactional claim: at most `limit` distinct request ids per (session, artifact) inline, across every process and host. */
  claimExposure(
    sessionId: string,
    artifactId: string,
    requestId: string,
    limit: number,
    scope?: StoreScope,
  ): Promise<boolean>;
  /** Record what was actually delivered (inline becomes max(old, new)). */
  recordExposure(
    sessionId: string,
    artifactId: string,
    requestId: string,
    inline: boolean,
    scope?: StoreScope,
  ): Promise<void>;
  /**
   * The commit point of a receipt: in one write transaction, under the lock retention takes, pin the
   * artifacts for the scope's session and check each still hashes to its id (compared with `known`
   * content instead, where given). Resolves with the ids that failed: a receipt naming one must not
   * be delivered. Given a scope, only artifacts its tenant may already read are pinned.
   */
  deliver(
    artifactIds: readonly string[],
    scope?: StoreScope,
    known?: ReadonlyMap<string, KnownContent>,
  ): Promise<Delivery>;
  /** {@link deliver} without the answer (kept for callers that verify on their own). */
  pin(artifactIds: readonly string[], scope?: StoreScope): Promise<void>;
  /** The session's pin record, or undefined when it holds none (never delivered, or released). */
  sessionPins(scope: StoreScope): Promise<SessionPins | undefined>;
  /** The host ended the session: retention may release its pins and leases from now on. */
  closeSession(scope: StoreScope): Promise<void>;
}

/** The working-state graph behind `working_state_apply` / `working_state_get`. */
export interface WorkingStateStore {
  /**
   * Validate and persist a batch atomically; the session id is the host's, recorded on the events.
   * Returns the result object (`{accepted, event_ids, counts}`); throws a TokenTerminatorError for a bad batch.
   */
  apply(
    sessionId: string,
    operations: readonly Readonly<Record<string, unknown>>[],
  ): Promise<Readonly<Record<string, unknown>>>;
  /** Current state of the session (`{nodes: {id: node}, edges: {id: edge}}`), at most `limit` nodes. */
  get(
    sessionId: string,
    options: { readonly includeRetired: boolean; readonly limit: number },
  ): Promise<Readonly<Record<string, unknown>>>;
}

/** State that lets any process continue a session: terminal baselines, sticky renderings, working state. */
export interface SessionStore {
  getBaseline(stateKey: string): Promise<TerminalBaseline | undefined>;
  /** Baselines protect their artifact until unused for the session TTL. */
  setBaseline(stateKey: string, artifactId: string, scope?: StoreScope): Promise<void>;
  /** Sticky per-session renderings for prompt-cache stability (key → rendered value); released with the session's pins. */
  getRendering(sessionId: string, key: string): Promise<string | undefined>;
  setRendering(sessionId: string, key: string, value: string, scope?: StoreScope): Promise<void>;
  /** Several renderings in one write transaction: the rows of {@link setRendering} for each entry in order. */
  setRenderings(
    sessionId: string,
    entries: readonly (readonly [key: string, value: string])[],
    scope?: StoreScope,
  ): Promise<void>;
  readonly workingState: WorkingStateStore;
}

/** Content-free request metrics. */
export interface MetricsStore {
  /** One row per (session, request), upserted. */
  recordRequestMetric(metric: RequestMetric, scope?: StoreScope): Promise<void>;
  /** Many rows in one transaction (a batch of answered requests); a (session, request) given twice keeps the later row. */
  recordRequestMetrics(metrics: readonly RequestMetric[], scope?: StoreScope): Promise<void>;
  /** Sums over every row (the `stats` command). */
  metricsSummary(): Promise<MetricsSummary>;
  /** The newest `limit` rows (default 10,000), oldest first (ties by session and request id). */
  requestMetricRows(limit?: number): Promise<readonly RequestMetricRow[]>;
}

/**
 * Token counts of one request item (a conversation item's compact canonical JSON and the spaced
 * segments telemetry counts; see src/ledger/item-measures.ts), each present when known.
 */
export type StoredCounts = { readonly [F in StoredCountField]?: number };

/** Every count a {@link StoredCounts} may hold (the store's columns, the item memo's fields). */
export const STORED_COUNT_FIELDS = Object.freeze(['compact', 'first', 'mid', 'last', 'only', 'alone'] as const);
export type StoredCountField = (typeof STORED_COUNT_FIELDS)[number];

/** The counts of the item whose compact canonical JSON has SHA-256 (base64) `hash`. */
export interface CountRow extends StoredCounts {
  readonly hash: string;
}

/**
 * Token counts of large request items, shared by every process on the store (a row holds a digest
 * and numbers, never content), keyed by the counter's identity (`TokenCounter.countsKey`).
 */
export interface CountStore {
  /** The stored counts of the items with these digests under `counter` (unknown digests are absent). */
  tokenCounts(counter: string, hashes: readonly string[]): Promise<ReadonlyMap<string, StoredCounts>>;
  /** Add counts under `counter`, in one transaction; a count already stored stays (the counter gives the same number). */
  recordTokenCounts(counter: string, rows: readonly CountRow[]): Promise<void>;
}

/** Which engine a store runs on. Only status, docs and tests look at it; no port behaves differently. */
export type StoreEngine = 'sqlite' | 'postgres';

/** The composite a runtime holds: every port plus its lifetime. */
export interface Vault extends ArtifactStore, LeaseStore, SessionStore, MetricsStore, CountStore, AsyncDisposable {
  /** Where it is, for status: the file path, ':memory:', or the database URL without its password. */
  readonly path: string;
  readonly engine: StoreEngine;
  /** True when the store could only be opened for reading: recovery works, every write refuses. */
  readonly readOnly: boolean;
  /** What the vault noticed about itself (deleted or replaced file, corruption, read-only). */
  health(): VaultHealth;
  close(): Promise<void>;
}

/** The data methods of a {@link Vault}: what it stores and answers (not its identity, health, lifetime or working-state store). */
export type VaultDataMethod = Exclude<
  keyof Vault,
  'path' | 'engine' | 'readOnly' | 'health' | 'close' | 'workingState' | typeof Symbol.asyncDispose
>;

/**
 * Every data method and what it is to the request path: a read by id (`id`: only through ScopedReads,
 * src/vault/scoped-reads.ts), forwarded by a RequestStore (`request`), or neither (`host`). A record,
 * not a list, so a method added to Vault without a line here fails to compile.
 */
const DATA_METHODS = {
  put: 'request',
  putMany: 'request',
  verify: 'id',
  summary: 'id',
  page: 'id',
  read: 'id',
  peek: 'id',
  find: 'id',
  search: 'id',
  usage: 'request',
  exposureAvailable: 'request',
  claimExposure: 'request',
  recordExposure: 'request',
  deliver: 'request',
  pin: 'request',
  sessionPins: 'request',
  closeSession: 'request',
  getBaseline: 'request',
  setBaseline: 'request',
  getRendering: 'request',
  setRendering: 'request',
  setRenderings: 'request',
  recordRequestMetric: 'host',
  recordRequestMetrics: 'host',
  metricsSummary: 'host',
  requestMetricRows: 'host',
  tokenCounts: 'host',
  recordTokenCounts: 'host',
} as const satisfies { readonly [M in VaultDataMethod]: 'id' | 'request' | 'host' };

type MethodsFor<U> = { [M in VaultDataMethod]: (typeof DATA_METHODS)[M] extends U ? M : never }[VaultDataMethod];
/** The reads by id of the artifact port (what a `RequestStore` leaves out). */
export type IdRead = MethodsFor<'id'>;

/** Every {@link VaultDataMethod}: what the health monitor watches and fault injection can fail. */
export const VAULT_DATA_METHODS: readonly VaultDataMethod[] = Object.freeze(
  Object.keys(DATA_METHODS) as VaultDataMethod[],
);

/** The data methods a `RequestStore` forwards (src/vault/scoped-reads.ts). */
export const REQUEST_METHODS = Object.freeze(
  VAULT_DATA_METHODS.filter((m) => DATA_METHODS[m] === 'request'),
) as readonly MethodsFor<'request'>[];
