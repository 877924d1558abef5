/**
 * The SQLite vault: kysely + better-sqlite3, one long-lived connection per vault.
 *
 * Writes are synchronous better-sqlite3 transactions (`BEGIN IMMEDIATE`) over prepared statements:
 * they never yield to the event loop half-way, so no kysely query can interleave with an open
 * transaction on the shared connection, and a process killed at any instant leaves either the whole
 * write or none of it. Kysely owns the schema (Migrator, inline provider) and the read queries.
 */
import type Database from 'better-sqlite3';
import type { Kysely } from 'kysely';
import { ArtifactNotFoundError, ConfigError, VaultCapacityError, VaultVerifyError } from '../errors.js';
import { canonicalJson } from '../measure/canonical-json.js';
import { VaultArgumentError, VaultContentError, VaultOpenError } from './errors.js';
import {
  codePointLength,
  foldCase,
  idMatchesSha,
  isWellFormedText,
  longIdForSha,
  sha256Hex,
  shortIdForSha,
  sliceCodePoints,
} from './identity.js';
import { openVaultDatabase, privateSideFiles } from './open.js';
import { makeRoom, retentionStatements, watermarks } from './retention.js';
import { META, type VaultDatabase } from './schema.js';
import { createSearchIndex } from './search.js';
import {
  COMPACT_CLIP,
  COMPACT_LINES,
  HEAD_LINES,
  LINE_CLIP,
  MAX_SIGNALS,
  findLines,
  splitLines,
  structureOf,
  synopsisOf,
} from './synopsis.js';
import type {
  ArtifactFind,
  ArtifactPage,
  ArtifactPeek,
  ArtifactSummary,
  PutInput,
  PutResult,
  RequestMetric,
  TerminalBaseline,
  Vault,
  VaultUsage,
} from './types.js';

/** Options for {@link createVault}. Every field but `path` has a default. */
export interface VaultOptions {
  /** SQLite file (its directory is created 0700, the file 0600), or `':memory:'`. */
  readonly path: string;
  /** Largest artifact in code points; larger content is refused. Default 2,000,000. */
  readonly maxArtifactChars?: number;
  /** Capacity in UTF-8 bytes of artifact content (the FTS index comes on top). Default 512 MiB. */
  readonly maxBytes?: number;
  /** Inserting past this % of capacity prunes unprotected artifacts. Default 90. */
  readonly highWaterPct?: number;
  /** Pruning stops at this % (clamped to highWaterPct − 1). Default 80. */
  readonly lowWaterPct?: number;
  /** Page ceiling for `page` and `peek` in code points. Default 20,000. */
  readonly maxPageChars?: number;
  /** Most results `search` returns. Default 50. */
  readonly maxSearchResults?: number;
  /** How long a write waits for another process's lock, in ms. Default 10,000. */
  readonly busyTimeoutMs?: number;
  /** Wall clock in ms for created/observed times (retention order). Default `Date.now`. */
  readonly clock?: () => number;
  /**
   * Index new artifacts for search in small batches while the process is idle (search always
   * finishes the queue first, so results are complete either way). Default true.
   */
  readonly indexInBackground?: boolean;
}

const DEFAULTS = {
  maxArtifactChars: 2_000_000,
  maxBytes: 512 * 1024 * 1024,
  highWaterPct: 90,
  lowWaterPct: 80,
  maxPageChars: 20_000,
  maxSearchResults: 50,
  busyTimeoutMs: 10_000,
} as const;

/** Content bytes indexed per idle step (keeps each step to tens of milliseconds). */
const INDEX_STEP_BYTES = 256 * 1024;
const INDEX_IDLE_MS = 25;
const DEFAULT_PEEK_CHARS = 8_000;
const MIN_PEEK_CHARS = 200;
const DEFAULT_FIND_MATCHES = 50;
const MAX_FIND_MATCHES = 100;
/** Verified sha → id entries kept per process (a repeat put of known content skips the read-back). */
const VERIFIED_CACHE = 65_536;
const LABEL_MAX = 200;
const EXACT_RECOVERY = 'token_terminator action=artifact_get';

type Resolved = { -readonly [K in keyof typeof DEFAULTS]: number };

function resolveOptions(options: VaultOptions): Resolved {
  if (options === null || typeof options !== 'object' || typeof options.path !== 'string' || options.path === '') {
    throw new ConfigError('createVault: `path` must be a non-empty string (a file path or ":memory:")');
  }
  const out = { ...DEFAULTS } as Resolved;
  const ranges: Record<keyof Resolved, [number, number]> = {
    maxArtifactChars: [1, Number.MAX_SAFE_INTEGER],
    maxBytes: [1, Number.MAX_SAFE_INTEGER],
    highWaterPct: [2, 100],
    lowWaterPct: [0, 99],
    maxPageChars: [1, 10_000_000],
    maxSearchResults: [1, 500],
    busyTimeoutMs: [0, 3_600_000],
  };
  for (const key of Object.keys(ranges) as (keyof Resolved)[]) {
    const value = options[key];
    if (value === undefined) continue;
    const [min, max] = ranges[key];
    if (!Number.isInteger(value) || value < min || value > max) {
      throw new ConfigError(`createVault: \`${key}\` must be an integer in ${min}…${max} (got ${String(value)})`);
    }
    out[key] = value;
  }
  return out;
}

/** Canonical compact JSON of tool arguments; provenance must never make a put fail. */
function argsJson(args: unknown): string {
  if (args === undefined) return '{}';
  try {
    return canonicalJson(args, { compact: true });
  } catch {
    return '"[unserializable arguments]"';
  }
}

function label(value: string | undefined): string {
  return (value ?? '').slice(0, LABEL_MAX);
}

function requireCount(name: string, value: number | undefined, min = 0): number {
  const v = value ?? min;
  if (!Number.isInteger(v) || v < min) throw new VaultArgumentError(`${name} must be an integer ≥ ${min} (got ${String(value)})`);
  return v;
}

function statements(raw: Database.Database) {
  return {
    bySha: raw.prepare('SELECT seq, artifact_id AS artifactId FROM artifacts WHERE sha256 = ?'),
    shaOfId: raw.prepare('SELECT sha256 FROM artifacts WHERE artifact_id = ?').pluck(),
    insertArtifact: raw.prepare(
      `INSERT INTO artifacts (artifact_id, sha256, char_count, byte_count, tool_name, created_at, last_observed_at, content)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    queueForIndex: raw.prepare('INSERT INTO fts_pending (seq) VALUES (?)'),
    insertObservation: raw.prepare(
      `INSERT OR IGNORE INTO artifact_observations
       (artifact_id, session_id, tool_call_id, tool_name, args_json, args_sha256, observed_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
    ),
    insertTool: raw.prepare('INSERT OR IGNORE INTO artifact_tools (artifact_id, tool_name, tool_fold) VALUES (?, ?, ?)'),
    touch: raw.prepare('UPDATE artifacts SET last_observed_at = MAX(last_observed_at, ?) WHERE seq = ?'),
    addMeta: raw.prepare('UPDATE vault_meta SET value = value + ? WHERE key = ?'),
    readBack: raw.prepare('SELECT sha256, content FROM artifacts WHERE artifact_id = ?'),
    content: raw.prepare(
      'SELECT sha256, tool_name AS toolName, char_count AS chars, content FROM artifacts WHERE artifact_id = ?',
    ),
    exists: raw.prepare('SELECT 1 FROM artifacts WHERE artifact_id = ?').pluck(),
    exposure: raw.prepare(
      'SELECT inline FROM artifact_exposures WHERE session_id = ? AND artifact_id = ? AND request_id = ?',
    ).pluck(),
    inlineCount: raw.prepare(
      'SELECT COUNT(*) FROM artifact_exposures WHERE session_id = ? AND artifact_id = ? AND inline = 1',
    ).pluck(),
    insertExposure: raw.prepare(
      `INSERT INTO artifact_exposures (session_id, artifact_id, request_id, inline, exposed_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (session_id, artifact_id, request_id)
       DO UPDATE SET inline = MAX(inline, excluded.inline), exposed_at = excluded.exposed_at`,
    ),
    pin: raw.prepare(
      'INSERT OR IGNORE INTO artifact_pins (artifact_id, pinned_at) SELECT artifact_id, ? FROM artifacts WHERE artifact_id = ?',
    ),
    upsertMetric: raw.prepare(
      `INSERT INTO request_metrics (session_id, request_id, mode, model, raw_chars, final_chars, raw_tokens, final_tokens,
         tokenizer, receipts, failed_open, saved_by_stage_json, created_at, updated_at)
       VALUES (@sessionId, @requestId, @mode, @model, @rawChars, @finalChars, @rawTokens, @finalTokens, @tokenizer,
         @receipts, @failedOpen, @savedByStage, @now, @now)
       ON CONFLICT (session_id, request_id) DO UPDATE SET mode = excluded.mode, model = excluded.model,
         raw_chars = excluded.raw_chars, final_chars = excluded.final_chars, raw_tokens = excluded.raw_tokens,
         final_tokens = excluded.final_tokens, tokenizer = excluded.tokenizer, receipts = excluded.receipts,
         failed_open = excluded.failed_open, saved_by_stage_json = excluded.saved_by_stage_json,
         updated_at = excluded.updated_at`,
    ),
    clearComponents: raw.prepare('DELETE FROM request_component_metrics WHERE session_id = ? AND request_id = ?'),
    insertComponent: raw.prepare(
      'INSERT INTO request_component_metrics (session_id, request_id, component, raw_tokens, final_tokens) VALUES (?, ?, ?, ?, ?)',
    ),
  };
}

/**
 * Open (or create) a vault.
 *
 * @example
 * ```ts
 * await using vault = await createVault({ path: '/tmp/tt/vault.sqlite3' });
 * const { artifactId } = await vault.put({ content: 'evidence αβγ\n', toolName: 'terminal' });
 * (await vault.page(artifactId)).content; // 'evidence αβγ\n'
 * ```
 * @throws ConfigError for bad options, VaultSchemaError for a database of a newer schema.
 */
export async function createVault(options: VaultOptions): Promise<Vault> {
  const opts = resolveOptions(options);
  const clock = options.clock ?? Date.now;
  if (typeof clock !== 'function') throw new ConfigError('createVault: `clock` must be a function returning ms');
  if (options.indexInBackground !== undefined && typeof options.indexInBackground !== 'boolean') {
    throw new ConfigError('createVault: `indexInBackground` must be a boolean');
  }
  const nowIso = (): string => new Date(clock()).toISOString();
  const marks = watermarks(opts.maxBytes, opts.highWaterPct, opts.lowWaterPct);
  const { raw, db, path } = await openVaultDatabase(options.path, opts.busyTimeoutMs);
  raw.function('tt_fold', { deterministic: true }, (s: unknown) => foldCase(String(s ?? '')));
  const st = statements(raw);
  const rt = retentionStatements(raw);
  const searchIndex = createSearchIndex(raw);
  /** sha → row seq of content this process has read back and verified. */
  const verified = new Map<string, number>();
  let closed = false;
  let sideFilesPrivate = false;

  const open = (): void => {
    if (closed) throw new VaultOpenError(`vault ${path} is closed`);
  };
  const remember = (sha: string, seq: number): void => {
    if (verified.size >= VERIFIED_CACHE) verified.delete(verified.keys().next().value as string);
    verified.set(sha, seq);
  };

  /** One write transaction: dedup, collision-safe id, retention, insert, provenance. */
  const writeTx = raw.transaction((input: PutInput, sha: string, chars: number, bytes: number) => {
    const now = nowIso();
    const toolName = label(input.toolName);
    const found = st.bySha.get(sha) as { seq: number; artifactId: string } | undefined;
    let artifactId: string;
    let seq: number;
    if (found === undefined) {
      const short = shortIdForSha(sha);
      // A different digest already owns the 32-hex prefix: this content gets the full-digest id.
      artifactId = st.shaOfId.get(short) === undefined ? short : longIdForSha(sha);
      makeRoom(rt, marks, bytes);
      seq = Number(st.insertArtifact.run(artifactId, sha, chars, bytes, toolName, now, now, input.content).lastInsertRowid);
      st.queueForIndex.run(seq);
      st.addMeta.run(bytes, META.bytes);
      st.addMeta.run(1, META.count);
    } else {
      artifactId = found.artifactId;
      seq = found.seq;
      st.touch.run(now, seq);
    }
    const args = argsJson(input.args);
    st.insertObservation.run(artifactId, label(input.sessionId), label(input.callId), toolName, args, sha256Hex(args), now);
    if (toolName !== '') st.insertTool.run(artifactId, toolName, foldCase(toolName));
    return { artifactId, created: found === undefined, seq };
  });

  let indexTimer: NodeJS.Timeout | undefined;
  /** Schedule one idle indexing step; it reschedules itself while the queue has rows. */
  const scheduleIndexing = (): void => {
    if (indexTimer !== undefined || closed || options.indexInBackground === false) return;
    indexTimer = setTimeout(() => {
      indexTimer = undefined;
      if (closed) return;
      // Never wait for another process's lock here: this is optional work on the event loop.
      raw.pragma('busy_timeout = 0');
      try {
        if (searchIndex.indexPending(INDEX_STEP_BYTES)) scheduleIndexing();
      } catch {
        // Busy or failing: leave the queue; the next put reschedules, and search drains it anyway.
      } finally {
        raw.pragma(`busy_timeout = ${opts.busyTimeoutMs}`);
      }
    }, INDEX_IDLE_MS);
    indexTimer.unref();
  };

  const claimTx = raw.transaction((sessionId: string, artifactId: string, requestId: string, limit: number) => {
    if (st.exists.get(artifactId) === undefined) throw new ArtifactNotFoundError(artifactId);
    const existing = st.exposure.get(sessionId, artifactId, requestId) as number | undefined;
    if (existing !== undefined) return existing === 1;
    if (Number(st.inlineCount.get(sessionId, artifactId)) >= limit) return false;
    st.insertExposure.run(sessionId, artifactId, requestId, 1, nowIso());
    return true;
  });

  const pinTx = raw.transaction((ids: readonly string[], now: string) => {
    for (const id of ids) st.pin.run(now, id);
  });

  const metricTx = raw.transaction((m: RequestMetric) => {
    st.upsertMetric.run({
      sessionId: m.sessionId,
      requestId: m.requestId,
      mode: label(m.mode),
      model: m.model === undefined ? null : label(m.model),
      rawChars: requireCount('rawChars', m.rawChars),
      finalChars: requireCount('finalChars', m.finalChars),
      rawTokens: m.rawTokens === undefined ? null : requireCount('rawTokens', m.rawTokens),
      finalTokens: m.finalTokens === undefined ? null : requireCount('finalTokens', m.finalTokens),
      tokenizer: m.tokenizer === undefined ? null : label(m.tokenizer),
      receipts: requireCount('receipts', m.receipts),
      failedOpen: m.failedOpen ? 1 : 0,
      savedByStage: canonicalJson(m.savedByStage ?? {}, { compact: true }),
      now: nowIso(),
    });
    st.clearComponents.run(m.sessionId, m.requestId);
    for (const [component, v] of Object.entries(m.components ?? {})) {
      st.insertComponent.run(m.sessionId, m.requestId, label(component), requireCount('raw', v.raw), requireCount('final', v.final));
    }
  });

  const immediate = <A extends unknown[], R>(tx: Database.Transaction<(...args: A) => R>, ...args: A): R => {
    const result = tx.immediate(...args);
    if (!sideFilesPrivate) {
      privateSideFiles(path);
      sideFilesPrivate = true;
    }
    return result;
  };

  const loadContent = (artifactId: string) => {
    const row = st.content.get(artifactId) as
      | { sha256: string; toolName: string; chars: number; content: string }
      | undefined;
    if (row === undefined) throw new ArtifactNotFoundError(artifactId);
    return row;
  };

  const summaryQuery = (kdb: Kysely<VaultDatabase>) =>
    kdb
      .selectFrom('artifacts as a')
      .select((eb) => [
        'a.artifact_id as artifactId',
        'a.sha256 as sha256',
        'a.char_count as chars',
        'a.byte_count as bytes',
        'a.tool_name as toolName',
        'a.created_at as createdAt',
        eb
          .selectFrom('artifact_observations as o')
          .whereRef('o.artifact_id', '=', 'a.artifact_id')
          .select((o) => o.fn.countAll<number>().as('n'))
          .as('observationCount'),
      ]);

  const vault: Vault = {
    path,

    async put(input: PutInput): Promise<PutResult> {
      open();
      const content = input?.content;
      if (typeof content !== 'string') throw new VaultArgumentError('put: content must be a string');
      if (!isWellFormedText(content)) {
        throw new VaultContentError('put: content contains a lone surrogate and cannot be stored exactly as UTF-8');
      }
      const chars = codePointLength(content);
      if (chars > opts.maxArtifactChars) {
        throw new VaultCapacityError(`artifact of ${chars} chars exceeds the per-artifact limit of ${opts.maxArtifactChars}`);
      }
      const bytes = Buffer.byteLength(content, 'utf8');
      if (bytes > opts.maxBytes) {
        throw new VaultCapacityError(`artifact of ${bytes} bytes exceeds the vault capacity of ${opts.maxBytes}`);
      }
      const sha = sha256Hex(content);
      const { artifactId, created, seq } = immediate(writeTx, input, sha, chars, bytes);
      if (created) scheduleIndexing();
      // The row id is AUTOINCREMENT (never reused), so a row pruned and written again is verified again.
      if (verified.get(sha) !== seq) {
        const back = st.readBack.get(artifactId) as { sha256: string; content: string } | undefined;
        if (back === undefined || back.sha256 !== sha || back.content !== content) throw new VaultVerifyError(artifactId);
        remember(sha, seq);
      }
      return Object.freeze({ artifactId, sha256: sha, created, chars, bytes });
    },

    async verify(artifactId: string): Promise<boolean> {
      open();
      const row = st.readBack.get(artifactId) as { sha256: string; content: string } | undefined;
      return row !== undefined && sha256Hex(row.content) === row.sha256 && idMatchesSha(artifactId, row.sha256);
    },

    async summary(artifactId: string): Promise<ArtifactSummary | undefined> {
      open();
      const row = await summaryQuery(db).where('a.artifact_id', '=', artifactId).executeTakeFirst();
      return row === undefined ? undefined : Object.freeze({ ...row, observationCount: Number(row.observationCount) });
    },

    async page(artifactId: string, offset = 0, limit = opts.maxPageChars): Promise<ArtifactPage> {
      open();
      const from = requireCount('offset', offset);
      const size = Math.min(requireCount('limit', limit, 1), opts.maxPageChars);
      const row = loadContent(artifactId);
      const text = from >= row.chars ? '' : sliceCodePoints(row.content, from, size, row.chars);
      const end = Math.min(row.chars, from + size);
      return Object.freeze({
        artifactId,
        content: text,
        offset: from,
        nextOffset: end < row.chars ? end : null,
        totalChars: row.chars,
        sha256: row.sha256,
        toolName: row.toolName,
      });
    },

    async peek(artifactId: string, limit = DEFAULT_PEEK_CHARS): Promise<ArtifactPeek> {
      open();
      const budget = Math.min(Math.max(requireCount('limit', limit, 1), MIN_PEEK_CHARS), opts.maxPageChars);
      const row = loadContent(artifactId);
      const summary = await vault.summary(artifactId);
      if (summary === undefined) throw new ArtifactNotFoundError(artifactId);
      const lines = splitLines(row.content);
      const base = {
        artifactId,
        sha256: row.sha256,
        toolName: row.toolName,
        totalChars: row.chars,
        totalBytes: summary.bytes,
        lineCount: lines.length,
        observationCount: summary.observationCount,
        createdAt: summary.createdAt,
        structure: structureOf(row.content, row.chars),
        lossy: true as const,
        exactRecovery: EXACT_RECOVERY,
      };
      let synopsis = synopsisOf(lines, HEAD_LINES, LINE_CLIP, MAX_SIGNALS);
      if (JSON.stringify({ ...base, synopsis }).length > budget) {
        synopsis = synopsisOf(lines, COMPACT_LINES, COMPACT_CLIP, COMPACT_LINES);
      }
      return Object.freeze({ ...base, synopsis });
    },

    async find(artifactId: string, query: string, limit = DEFAULT_FIND_MATCHES): Promise<ArtifactFind> {
      open();
      if (typeof query !== 'string' || query.trim() === '') throw new VaultArgumentError('find: query must be non-empty');
      const cap = Math.min(requireCount('limit', limit, 1), MAX_FIND_MATCHES);
      const { matches, totalMatches } = findLines(loadContent(artifactId).content, query, cap);
      return Object.freeze({ artifactId, query, matches, totalMatches, truncated: totalMatches > matches.length, lossy: true });
    },

    async search(query: string, limit = opts.maxSearchResults): Promise<readonly ArtifactSummary[]> {
      open();
      const cap = Math.min(requireCount('limit', limit, 1), opts.maxSearchResults);
      return searchIndex.search(typeof query === 'string' ? query : '', cap);
    },

    async exposureAvailable(sessionId, artifactId, requestId, limit) {
      open();
      const max = requireCount('limit', limit);
      const existing = st.exposure.get(sessionId, artifactId, requestId) as number | undefined;
      if (existing !== undefined) return existing === 1;
      return Number(st.inlineCount.get(sessionId, artifactId)) < max;
    },

    async claimExposure(sessionId, artifactId, requestId, limit) {
      open();
      return immediate(claimTx, sessionId, artifactId, requestId, requireCount('limit', limit));
    },

    async recordExposure(sessionId, artifactId, requestId, inline) {
      open();
      if (st.exists.get(artifactId) === undefined) throw new ArtifactNotFoundError(artifactId);
      st.insertExposure.run(sessionId, artifactId, requestId, inline ? 1 : 0, nowIso());
    },

    async pin(artifactIds) {
      open();
      immediate(pinTx, artifactIds, nowIso());
    },

    async getBaseline(stateKey: string): Promise<TerminalBaseline | undefined> {
      open();
      const row = await db
        .selectFrom('terminal_baselines')
        .select(['state_key as stateKey', 'artifact_id as artifactId', 'updated_at as updatedAt'])
        .where('state_key', '=', stateKey)
        .executeTakeFirst();
      return row === undefined ? undefined : Object.freeze(row);
    },

    async setBaseline(stateKey: string, artifactId: string): Promise<void> {
      open();
      if (st.exists.get(artifactId) === undefined) throw new ArtifactNotFoundError(artifactId);
      await db
        .insertInto('terminal_baselines')
        .values({ state_key: stateKey, artifact_id: artifactId, updated_at: nowIso() })
        .onConflict((oc) => oc.column('state_key').doUpdateSet((eb) => ({
          artifact_id: eb.ref('excluded.artifact_id'),
          updated_at: eb.ref('excluded.updated_at'),
        })))
        .execute();
    },

    async getRendering(sessionId: string, key: string): Promise<string | undefined> {
      open();
      const row = await db
        .selectFrom('session_renderings')
        .select('value')
        .where('session_id', '=', sessionId)
        .where('render_key', '=', key)
        .executeTakeFirst();
      return row?.value;
    },

    async setRendering(sessionId: string, key: string, value: string): Promise<void> {
      open();
      await db
        .insertInto('session_renderings')
        .values({ session_id: sessionId, render_key: key, value, updated_at: nowIso() })
        .onConflict((oc) => oc.columns(['session_id', 'render_key']).doUpdateSet((eb) => ({
          value: eb.ref('excluded.value'),
          updated_at: eb.ref('excluded.updated_at'),
        })))
        .execute();
    },

    async recordRequestMetric(metric: RequestMetric): Promise<void> {
      open();
      if (typeof metric?.sessionId !== 'string' || typeof metric.requestId !== 'string') {
        throw new VaultArgumentError('recordRequestMetric: sessionId and requestId must be strings');
      }
      immediate(metricTx, metric);
    },

    async usage(): Promise<VaultUsage> {
      open();
      const meta = await db.selectFrom('vault_meta').select(['key', 'value']).execute();
      const get = (key: string) => Number(meta.find((m) => m.key === key)?.value ?? 0);
      return Object.freeze({
        artifacts: get(META.count),
        bytes: get(META.bytes),
        capacityBytes: marks.capacityBytes,
        highWaterBytes: marks.highWaterBytes,
        lowWaterBytes: marks.lowWaterBytes,
        prunedArtifacts: get(META.prunedArtifacts),
        prunedBytes: get(META.prunedBytes),
      });
    },

    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      if (indexTimer !== undefined) clearTimeout(indexTimer);
      verified.clear();
      await db.destroy();
    },

    [Symbol.asyncDispose](): Promise<void> {
      return vault.close();
    },
  };

  return vault;
}
