/**
 * The artifact port over kysely: content-addressed puts (dedup, collision-safe ids, retention,
 * provenance, read-back verification), exact pages, lossy views and search. The same queries run
 * on both dialects; the dialect supplies the writer lock, row locks, the content codec and the index.
 */
import type { InsertObject, Kysely } from 'kysely';
import { ArtifactNotFoundError, VaultCapacityError, VaultVerifyError } from '../errors.js';
import { codePoints } from '../measure/canonical-json.js';
import { sessionStateKey } from '../step.js';
import { argsJson, label, requireCount, sessionKey, storedScope, type StoreContext } from './context.js';
import { VaultArgumentError, VaultContentError } from './errors.js';
import {
  foldCase,
  idMatchesSha,
  isExactContent,
  isWellFormedText,
  longIdForSha,
  sha256Hex,
  shortIdForSha,
  sliceCodePoints,
} from './identity.js';
import type { VaultConnection } from './dialect.js';
import type { ArtifactStore, KnownContent, SearchResults, StoreScope } from './ports.js';
import { prepared, preparedRows } from './prepared.js';
import { accessibleIds, selectSummaries, toSummary } from './queries.js';
import { addCounter, makeRoom } from './retention.js';
import { META, type VaultDatabase } from './schema.js';
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
import type { ArtifactSummary, PutInput, PutResult, VaultUsage } from './types.js';

const DEFAULT_PEEK_CHARS = 8_000;
const MIN_PEEK_CHARS = 200;
const DEFAULT_FIND_MATCHES = 50;
const MAX_FIND_MATCHES = 100;
/** Verified sha → row key entries kept per process (a repeat put of known content skips the read-back). */
const VERIFIED_CACHE = 65_536;
/** Row keys whose content this process read back and found hashing to their digest (reads verify once). */
const READ_CACHE = 65_536;

/** Results with the `partial` flag (non-enumerable: the value stays a plain frozen array for equality and JSON). */
export function searchResults(rows: readonly ArtifactSummary[], partial: boolean): SearchResults {
  const out = [...rows];
  Object.defineProperty(out, 'partial', { value: partial, enumerable: false });
  return Object.freeze(out) as unknown as SearchResults;
}
const EXACT_RECOVERY = 'token_terminator action=artifact_get';
/** Longest search or find query (code points, after trimming): longer ones are refused, never half-run. */
export const MAX_QUERY_CHARS = 2000;

/** Move the artifact's last observation forward (never back); finds and row-locks it in one statement. */
const touchArtifact = prepared((conn: VaultConnection, sha: string, now: string) =>
  conn.db
    .updateTable('artifacts')
    .set((eb) => ({
      last_observed_at: eb.case().when('last_observed_at', '<', now).then(now).else(eb.ref('last_observed_at')).end(),
    }))
    .where('sha256', '=', sha)
    .returning(['seq', 'artifact_id as artifactId']),
);
const lockedCounter = prepared((conn: VaultConnection, key: string) =>
  conn.lock(conn.db.selectFrom('vault_meta').select('value').where('key', '=', key), 'counter'),
);
const seqOf = prepared((conn: VaultConnection, artifactId: string) =>
  conn.db.selectFrom('artifacts').select('seq').where('artifact_id', '=', artifactId),
);
const insertArtifact = prepared(
  (
    conn: VaultConnection,
    artifactId: string,
    sha: string,
    chars: number,
    bytes: number,
    toolName: string,
    now: string,
    content: string | Uint8Array,
  ) =>
    conn.db
      .insertInto('artifacts')
      .values({
        artifact_id: artifactId,
        sha256: sha,
        char_count: chars,
        byte_count: bytes,
        tool_name: toolName,
        created_at: now,
        last_observed_at: now,
        content,
      })
      .returning('seq'),
);
/** Rows per provenance insert: far below either dialect's limit on parameters. */
const ROWS_PER_INSERT = 200;

/** Insert rows into `table` unless present, given their values in `columns` order (a statement per ROWS_PER_INSERT rows). */
function insertRows<T extends 'artifact_access' | 'artifact_observations' | 'artifact_tools'>(
  table: T,
  ...columns: (keyof VaultDatabase[T] & string)[]
) {
  const width = columns.length;
  const statement = preparedRows(
    (conn: VaultConnection, n: number, ...values: readonly unknown[]) =>
      conn.db
        .insertInto(table)
        .values(
          Array.from({ length: n }, (_, i) =>
            Object.fromEntries(columns.map((c, j) => [c, values[i * width + j]])),
          ) as InsertObject<VaultDatabase, T>[],
        )
        .onConflict((oc) => oc.doNothing()),
    (n) => n * width,
  );
  return async (conn: VaultConnection, trx: Db, values: unknown[]): Promise<void> => {
    for (let i = 0; i < values.length; i += ROWS_PER_INSERT * width) {
      const part = values.slice(i, i + ROWS_PER_INSERT * width);
      await statement.execute(conn, trx, part.length / width, ...part);
    }
  };
}
/** The provenance tables, in the order a put writes them: the owner's access, the observation, the tool name. */
const PROVENANCE = [
  insertRows('artifact_access', 'tenant', 'session_id', 'artifact_id', 'pinned', 'updated_at'),
  insertRows(
    'artifact_observations',
    'artifact_id',
    'session_id',
    'tool_call_id',
    'tool_name',
    'args_json',
    'args_sha256',
    'observed_at',
  ),
  insertRows('artifact_tools', 'artifact_id', 'tool_name', 'tool_fold'),
];
/** An artifact's row (digest, sizes, content): unscoped, visible to a tenant, visible to a session of it. */
const contentQuery = (conn: VaultConnection, artifactId: string) =>
  conn.db
    .selectFrom('artifacts as a')
    .select([
      'a.seq as seq',
      'a.sha256 as sha256',
      'a.tool_name as toolName',
      'a.char_count as chars',
      'a.byte_count as bytes',
      'a.content as content',
    ])
    .where('a.artifact_id', '=', artifactId);
const contentOf = prepared(contentQuery);
const tenantContentOf = prepared((conn: VaultConnection, artifactId: string, tenant: string) =>
  contentQuery(conn, artifactId).where('a.artifact_id', 'in', accessibleIds(conn.db, { tenant })),
);
const sessionContentOf = prepared((conn: VaultConnection, artifactId: string, tenant: string, sessionId: string) =>
  contentQuery(conn, artifactId).where('a.artifact_id', 'in', accessibleIds(conn.db, { tenant, sessionId })),
);

type Db = Kysely<VaultDatabase>;
type Found = { seq: number | bigint; artifactId: string } | undefined;

/** The store context with this artifact store's process-local verification memos. */
interface ArtifactContext extends StoreContext {
  /** sha → row key of content this process has read back and verified. */
  readonly verified: Map<string, number>;
  /** Row keys read back and verified by hash in this process. */
  readonly readVerified: Set<number>;
}

/** The code point and UTF-8 byte lengths of a put's content, checked against the vault's limits. */
function putSizes(ctx: StoreContext, content: unknown): { chars: number; bytes: number } {
  const { limits } = ctx;
  if (typeof content !== 'string') throw new VaultArgumentError('put: content must be a string');
  if (!isWellFormedText(content)) {
    throw new VaultContentError('put: content contains a lone surrogate and cannot be stored exactly as UTF-8');
  }
  const chars = codePoints(content);
  if (chars > limits.maxArtifactChars) {
    throw new VaultCapacityError(
      `artifact of ${chars} chars exceeds the per-artifact limit of ${limits.maxArtifactChars}`,
    );
  }
  const bytes = Buffer.byteLength(content, 'utf8');
  if (bytes > limits.maxBytes) {
    throw new VaultCapacityError(`artifact of ${bytes} bytes exceeds the vault capacity of ${limits.maxBytes}`);
  }
  return { chars, bytes };
}

/** A putMany transaction: the byte counter once locked, and the provenance rows held to its end (per {@link PROVENANCE} table, their values). */
type Batch = { bytes?: number; readonly rows: readonly unknown[][] };

/**
 * New content: lock the byte counter (serializes new artifacts across hosts), then look again,
 * since another writer may have stored the same content while we waited; insert it if still absent.
 * Once locked in this transaction, the caller's lookup already ran under the lock.
 */
async function insertNew(
  ctx: StoreContext,
  trx: Db,
  batch: Batch,
  { input: { content }, sha, sizes }: { input: PutInput; sha: string; sizes: { chars: number; bytes: number } },
  toolName: string,
  now: string,
): Promise<{ found: NonNullable<Found>; created: boolean }> {
  const { conn, limits, marks } = ctx;
  if (batch.bytes === undefined) {
    batch.bytes = Number((await lockedCounter.first(conn, trx, META.bytes))?.value ?? 0);
    const again = await touchArtifact.first(conn, trx, sha, now);
    if (again !== undefined) return { found: again, created: false };
  }
  const short = shortIdForSha(sha);
  const taken = await seqOf.first(conn, trx, short);
  // A different digest already owns the 32-hex prefix: this content gets the full-digest id.
  const artifactId = taken === undefined ? short : longIdForSha(sha);
  const ms = ctx.clock();
  // Retention may delete what this batch observed: its provenance goes first, as with single puts.
  if (batch.bytes + sizes.bytes > marks.highWaterBytes) await writeBatch(conn, trx, batch);
  batch.bytes = await makeRoom(trx, conn, marks, batch.bytes, sizes.bytes, {
    idleBefore: new Date(ms - limits.sessionTtlMs).toISOString(),
    now: ms,
    room: ctx.room,
  });
  const row = await insertArtifact.first(
    conn,
    trx,
    artifactId,
    sha,
    sizes.chars,
    sizes.bytes,
    toolName,
    now,
    conn.encodeContent(content),
  );
  if (row === undefined) throw new Error('put: the insert returned no row');
  await conn.search.added(trx, Number(row.seq), content);
  batch.bytes += sizes.bytes;
  return { found: { seq: row.seq, artifactId }, created: true };
}

/** The put's provenance rows, held in `batch`. */
function addProvenance(
  ctx: StoreContext,
  batch: Batch,
  input: PutInput,
  scope: StoreScope | undefined,
  artifactId: string,
  toolName: string,
  now: string,
): void {
  const args = argsJson(input.args);
  const owner = sessionKey(ctx, scope, input.sessionId);
  const [access, observations, tools] = batch.rows as [unknown[], unknown[], unknown[]];
  if (owner.tenant !== '' || owner.sessionId !== '') access.push(owner.tenant, owner.sessionId, artifactId, 0, now);
  // Keyed by tenant and session (sessionStateKey): what a summary tells a tenant is its own observations.
  const session = sessionStateKey({
    tenant: scope?.tenant ?? '',
    sessionId: scope?.sessionId ?? input.sessionId ?? '',
  });
  observations.push(artifactId, label(ctx, session), label(ctx, input.callId), toolName, args, sha256Hex(args), now);
  if (toolName !== '') tools.push(artifactId, toolName, foldCase(toolName));
}

/** Write the provenance rows `batch` held back, a statement per table. */
async function writeBatch(conn: VaultConnection, trx: Db, batch: Batch): Promise<void> {
  for (const [k, insert] of PROVENANCE.entries()) await insert(conn, trx, batch.rows[k]!.splice(0));
}

function readBack(ctx: StoreContext, artifactId: string, scope?: StoreScope) {
  const { conn } = ctx;
  const stored = storedScope(ctx, scope);
  if (stored === undefined) return contentOf.first(conn, conn.db, artifactId);
  return stored.sessionId === undefined
    ? tenantContentOf.first(conn, conn.db, artifactId, stored.tenant ?? '')
    : sessionContentOf.first(conn, conn.db, artifactId, stored.tenant ?? '', stored.sessionId);
}

/** The exact content, verified by its hash once per row key and process; an id the scope may not read is unknown. */
async function loadContent(ctx: ArtifactContext, artifactId: string, scope: StoreScope | undefined) {
  const row = await readBack(ctx, artifactId, scope);
  if (row === undefined) throw new ArtifactNotFoundError(artifactId);
  const content = ctx.conn.decodeContent(row.content);
  const seq = Number(row.seq);
  const { readVerified } = ctx;
  if (!readVerified.has(seq)) {
    // A damaged page can return other bytes without an error: never serve them as the artifact.
    if (sha256Hex(content) !== row.sha256 || !idMatchesSha(artifactId, row.sha256))
      throw new VaultVerifyError(artifactId);
    if (readVerified.size >= READ_CACHE) readVerified.delete(readVerified.values().next().value as number);
    readVerified.add(seq);
  }
  return { sha256: row.sha256, toolName: row.toolName, chars: Number(row.chars), bytes: Number(row.bytes), content };
}

/**
 * Store `inputs` in ONE write transaction (per input, in order: dedup, collision-safe id, retention, insert; then the
 * provenance rows and counters of all), then read new content back. An input refused (size, lone surrogate, not a string) or whose read-back fails is its
 * error, the others are stored; a failed transaction rejects the batch.
 */
async function putArtifacts(ctx: ArtifactContext, inputs: readonly PutInput[], scope?: StoreScope) {
  if (!Array.isArray(inputs)) throw new VaultArgumentError('putMany: inputs must be an array');
  const { conn } = ctx;
  const puts = inputs.map((input) => {
    try {
      const sizes = putSizes(ctx, input?.content);
      return { input, sizes, sha: input.digest ?? sha256Hex(input.content), artifactId: '', seq: 0, created: false };
    } catch (error) {
      return error as Error;
    }
  });
  const valid = puts.filter((p) => !(p instanceof Error)) as Exclude<(typeof puts)[number], Error>[];
  if (valid.length > 0)
    await conn.write(async (trx) => {
      const now = ctx.nowIso();
      const batch: Batch = { rows: PROVENANCE.map(() => []) };
      for (const p of valid) {
        const toolName = label(ctx, p.input.toolName);
        let found: Found = await touchArtifact.first(conn, trx, p.sha, now);
        p.created = false;
        if (found === undefined) ({ found, created: p.created } = await insertNew(ctx, trx, batch, p, toolName, now));
        addProvenance(ctx, batch, p.input, scope, found.artifactId, toolName, now);
        [p.artifactId, p.seq] = [found.artifactId, Number(found.seq)];
      }
      await writeBatch(conn, trx, batch);
      const created = valid.filter((p) => p.created);
      const bytes = created.reduce((n, p) => n + p.sizes.bytes, 0);
      await addCounter(conn, trx, META.bytes, bytes);
      await addCounter(conn, trx, META.count, created.length);
    }, scope?.budget);
  if (valid.some((p) => p.created)) conn.search.afterPut();
  // Row keys are never reused, so a row pruned and written again is verified again.
  const verified = async ({ input, sha, sizes, artifactId, seq, created }: (typeof valid)[number]) => {
    if (ctx.verified.get(sha) !== seq) {
      const back = await readBack(ctx, artifactId);
      if (back === undefined || back.sha256 !== sha || ctx.conn.decodeContent(back.content) !== input.content)
        throw new VaultVerifyError(artifactId);
      if (ctx.verified.size >= VERIFIED_CACHE) ctx.verified.delete(ctx.verified.keys().next().value as string);
      ctx.verified.set(sha, seq);
    }
    return Object.freeze({ artifactId, sha256: sha, created, chars: sizes.chars, bytes: sizes.bytes });
  };
  const out: (PutResult | Error)[] = [];
  for (const p of puts) out.push(p instanceof Error ? p : await verified(p).catch((e: Error) => e));
  return out;
}

async function verifyArtifact(ctx: StoreContext, artifactId: string, scope?: StoreScope, known?: KnownContent) {
  const row = await readBack(ctx, artifactId, scope);
  if (row === undefined || !idMatchesSha(artifactId, row.sha256)) return false;
  return isExactContent(ctx.conn.decodeContent(row.content), row.sha256, known);
}

async function summaryOf(ctx: StoreContext, artifactId: string, scope?: StoreScope) {
  const db = ctx.conn.db;
  const stored = storedScope(ctx, scope);
  let q = selectSummaries(db, stored).where('a.artifact_id', '=', artifactId);
  if (stored !== undefined) q = q.where('a.artifact_id', 'in', accessibleIds(db, stored));
  const row = await q.executeTakeFirst();
  return row === undefined ? undefined : toSummary(row);
}

async function pageOf(ctx: ArtifactContext, artifactId: string, offset: number, limit: number, scope?: StoreScope) {
  const from = requireCount('offset', offset);
  const size = Math.min(requireCount('limit', limit, 1), ctx.limits.maxPageChars);
  const row = await loadContent(ctx, artifactId, scope);
  const text = from >= row.chars ? '' : sliceCodePoints(row.content, from, size, row.chars);
  const end = Math.min(row.chars, from + size);
  return Object.freeze({
    artifactId,
    content: text,
    offset: from,
    nextOffset: end < row.chars ? end : null,
    totalChars: row.chars,
    sha256: row.sha256,
    // A scoped read names the tool its own tenant observed the content as, never another's.
    toolName: scope === undefined ? row.toolName : ((await summaryOf(ctx, artifactId, scope))?.toolName ?? ''),
  });
}

async function peekOf(ctx: ArtifactContext, artifactId: string, limit: number, scope?: StoreScope) {
  const budget = Math.min(Math.max(requireCount('limit', limit, 1), MIN_PEEK_CHARS), ctx.limits.maxPageChars);
  const row = await loadContent(ctx, artifactId, scope);
  const summary = await summaryOf(ctx, artifactId, scope);
  if (summary === undefined) throw new ArtifactNotFoundError(artifactId);
  const lines = splitLines(row.content);
  const base = {
    artifactId,
    sha256: row.sha256,
    toolName: summary.toolName,
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
}

async function findIn(ctx: ArtifactContext, artifactId: string, query: string, limit: number, scope?: StoreScope) {
  if (typeof query !== 'string' || query.trim() === '') throw new VaultArgumentError('find: query must be non-empty');
  const cap = Math.min(requireCount('limit', limit, 1), MAX_FIND_MATCHES);
  const { matches, totalMatches } = findLines((await loadContent(ctx, artifactId, scope)).content, query, cap);
  return Object.freeze({
    artifactId,
    query,
    matches,
    totalMatches,
    truncated: totalMatches > matches.length,
    lossy: true,
  });
}

async function searchAll(ctx: StoreContext, query: string, limit: number, scope?: StoreScope): Promise<SearchResults> {
  const { limits } = ctx;
  const cap = Math.min(requireCount('limit', limit, 1), limits.maxSearchResults);
  const needle = foldCase((typeof query === 'string' ? query : '').trim());
  if (needle === '') return searchResults([], false);
  if (codePoints(needle) > MAX_QUERY_CHARS)
    throw new VaultArgumentError(`search: query must be at most ${MAX_QUERY_CHARS} characters`);
  const found = await ctx.conn.search.search(needle, cap, {
    scope: storedScope(ctx, scope),
    deadline: ctx.clock() + limits.searchDeadlineMs,
    clock: ctx.clock,
  });
  return searchResults(found.rows, found.partial);
}

async function usageOf(ctx: StoreContext): Promise<VaultUsage> {
  const { marks } = ctx;
  const meta = await ctx.conn.db.selectFrom('vault_meta').select(['key', 'value']).execute();
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
}

/** The artifact port, and `clear` to drop its process-local caches (on close). */
export function createArtifactStore(store: StoreContext): ArtifactStore & { clear(): void } {
  const ctx: ArtifactContext = { ...store, verified: new Map(), readVerified: new Set() };
  const { limits } = ctx;
  return {
    put: (input, scope) =>
      putArtifacts(ctx, [input], scope).then(([r]) => (r instanceof Error ? Promise.reject(r) : r!)),
    putMany: (inputs, scope) => putArtifacts(ctx, inputs, scope),
    verify: (artifactId, scope, known) => verifyArtifact(ctx, artifactId, scope, known),
    summary: (artifactId, scope) => summaryOf(ctx, artifactId, scope),
    page: (artifactId, offset = 0, limit = limits.maxPageChars, scope) => pageOf(ctx, artifactId, offset, limit, scope),
    read: async (artifactId, scope) => (await loadContent(ctx, artifactId, scope)).content,
    peek: (artifactId, limit = DEFAULT_PEEK_CHARS, scope) => peekOf(ctx, artifactId, limit, scope),
    find: (artifactId, query, limit = DEFAULT_FIND_MATCHES, scope) => findIn(ctx, artifactId, query, limit, scope),
    search: (query, limit = limits.maxSearchResults, scope) => searchAll(ctx, query, limit, scope),
    usage: () => usageOf(ctx),
    clear: () => ctx.verified.clear(),
  };
}
